package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// frontProxyClientName is the front-proxy client certificate's common name,
// the only one kube-apiserver's --requestheader-allowed-names accepts: an
// extension API server (metrics-server) trusts the X-Remote-User headers of
// a request only when this client presents them.
const frontProxyClientName = "front-proxy-client"

// aggregationArgs writes a front-proxy CA and a client certificate it signed
// into dir and returns the kube-apiserver flags of the aggregation layer, as
// kubeadm sets them: the API server proxies requests for an APIService's
// group to its Service, authenticating with the client certificate and
// passing the user in request headers. Aggregator routing stays off (as
// kubeadm leaves it): the Service resolves by its cluster IP, or for an
// ExternalName Service (metrics-server's, MetricsServer) by its name, which
// is how a process on loopback is reached with no kube-proxy and no
// privilege (with routing on, the aggregator refuses an ExternalName
// Service, and an EndpointSlice refuses a loopback address).
func aggregationArgs(dir string) ([][2]string, error) {
	ca, caKey, err := newCert(nil, nil, "berth-sandbox-front-proxy-ca", true)
	if err != nil {
		return nil, err
	}
	client, clientKey, err := newCert(ca, caKey, frontProxyClientName, false)
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "front-proxy-ca.crt")
	certFile := filepath.Join(dir, "front-proxy-client.crt")
	keyFile := filepath.Join(dir, "front-proxy-client.key")
	if err := writePEM(caFile, "CERTIFICATE", ca.Raw); err != nil {
		return nil, err
	}
	if err := writePEM(certFile, "CERTIFICATE", client.Raw); err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(keyFile, "EC PRIVATE KEY", der); err != nil {
		return nil, err
	}
	return [][2]string{
		{"requestheader-client-ca-file", caFile},
		{"requestheader-allowed-names", frontProxyClientName},
		{"requestheader-username-headers", "X-Remote-User"},
		{"requestheader-group-headers", "X-Remote-Group"},
		{"requestheader-extra-headers-prefix", "X-Remote-Extra-"},
		{"proxy-client-cert-file", certFile},
		{"proxy-client-key-file", keyFile},
	}, nil
}

// newCert makes a self-signed CA (parent nil) or a client certificate signed
// by parent, valid for a day.
func newCert(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
