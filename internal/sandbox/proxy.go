package sandbox

import (
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// Proxy is a TCP proxy in front of the API server. A component given its
// Kubeconfig reaches the API server only through it, so Cut makes the API
// server unreachable for that component alone while the rest of the
// sandbox goes on. Cut resets open connections and refuses new ones, so
// requests fail at once (a load balancer with no healthy backend), not
// after a timeout as in a partition that drops packets.
type Proxy struct {
	lis    net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	// delay is added to every chunk, both directions (Delay).
	delay atomic.Int64
	// Kubeconfig is the control plane's admin kubeconfig pointed at the
	// proxy.
	Kubeconfig string
}

// StartProxy listens on a loopback port and forwards to cp's API server.
func StartProxy(cp *ControlPlane, name string) (*Proxy, error) {
	api, err := url.Parse(cp.Config.Host)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{lis: lis, target: api.Host, conns: map[net.Conn]struct{}{}}
	cfg, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	if err != nil {
		_ = lis.Close()
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + lis.Addr().String()
		c.TLSServerName = "localhost"
	}
	p.Kubeconfig = filepath.Join(cp.Dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p.Kubeconfig); err != nil {
		_ = lis.Close()
		return nil, err
	}
	go p.serve()
	return p, nil
}

func (p *Proxy) serve() {
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = in.Close()
			continue
		}
		p.conns[in] = struct{}{}
		p.mu.Unlock()
		go p.pipe(in)
	}
}

func (p *Proxy) pipe(in net.Conn) {
	defer p.forget(in)
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = out.Close()
		return
	}
	p.conns[out] = struct{}{}
	p.mu.Unlock()
	defer p.forget(out)
	done := make(chan struct{}, 2)
	go func() { p.copy(out, in); done <- struct{}{} }()
	go func() { p.copy(in, out); done <- struct{}{} }()
	<-done
}

// copy forwards src to dst, each chunk held until the delay in force when
// it was read has passed (a slow or stalled path: the bytes arrive late,
// in order, the connection stays open). Chunks still held when src closes
// are dropped, as a reset connection drops them: a client that gave up (a
// scheduler that exited on its lost lease) sends nothing after its end.
func (p *Proxy) copy(dst io.Writer, src io.Reader) {
	type chunk struct {
		b   []byte
		due time.Time
	}
	ch := make(chan chunk, 256)
	var closed atomic.Bool
	go func() {
		defer close(ch)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				ch <- chunk{append([]byte(nil), buf[:n]...), time.Now().Add(time.Duration(p.delay.Load()))}
			}
			if err != nil {
				closed.Store(true)
				return
			}
		}
	}()
	failed := false
	for c := range ch {
		if failed {
			continue // drain, so the reader ends when src closes
		}
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
			if closed.Load() {
				failed = true
				continue
			}
		}
		if _, err := dst.Write(c.b); err != nil {
			failed = true
		}
	}
}

// Server is the proxy's URL, for a kubeconfig of another identity.
func (p *Proxy) Server() string { return "https://" + p.lis.Addr().String() }

// Delay holds every chunk read from now on for d in each direction (0:
// none): a partition that delays instead of resetting when d is longer
// than the clients' timeouts, a slow API when it is a few seconds.
func (p *Proxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *Proxy) forget(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy.
func (p *Proxy) Close() {
	_ = p.lis.Close()
	p.Cut()
}
