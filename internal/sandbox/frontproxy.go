package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
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
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca, err := cert.NewSelfSignedCACert(cert.Config{CommonName: "berth-sandbox-front-proxy-ca"}, caKey)
	if err != nil {
		return nil, err
	}
	client, clientKey, err := newClientCert(ca, caKey, frontProxyClientName)
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "front-proxy-ca.crt")
	certFile := filepath.Join(dir, "front-proxy-client.crt")
	keyFile := filepath.Join(dir, "front-proxy-client.key")
	for path, c := range map[string]*x509.Certificate{caFile: ca, certFile: client} {
		data, err := cert.EncodeCertificates(c)
		if err != nil {
			return nil, err
		}
		if err := cert.WriteCert(path, data); err != nil {
			return nil, err
		}
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(clientKey)
	if err != nil {
		return nil, err
	}
	if err := keyutil.WriteKey(keyFile, keyPEM); err != nil {
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

// newClientCert makes a client certificate for cn signed by ca, valid for a
// day (client-go's cert package makes CAs and self-signed serving
// certificates, not a CA's client certificates).
func newClientCert(ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
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
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	c, err := x509.ParseCertificate(der)
	return c, key, err
}
