package main

// The control plane's keys and certificates, made once per directory and kept across
// restarts (as kubeadm keeps /etc/kubernetes/pki): a CA, the API server's serving
// certificate, an admin client certificate in system:masters, and service-account
// signing keys by name, so that a test can rotate them.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The names the API server's certificate answers to: loopback, and the in-cluster names
// a kubeconfig or a pod may use.
var serverNames = []string{
	"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
	"kubernetes.default.svc.cluster.local",
}

type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// ensure makes the CA and the certificates it signs unless the directory has them.
func (p pki) ensure() error {
	if _, err := os.Stat(p.path("ca.crt")); err == nil {
		return nil
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTemplate := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "argo-results-test-kubernetes-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := sign(caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := p.writeKeyPair("ca", caDER, caKey); err != nil {
		return err
	}
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    serverNames,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := p.issue("apiserver", serving, ca, caKey); err != nil {
		return err
	}
	// kubeadm's admin.conf identity: the group system:masters passes every authorizer.
	admin := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return p.issue("admin", admin, ca, caKey)
}

func (p pki) issue(name string, template, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := sign(template, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	return p.writeKeyPair(name, der, key)
}

func sign(template, parent *x509.Certificate, public any, signer *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(10 * 365 * 24 * time.Hour)
	return x509.CreateCertificate(rand.Reader, template, parent, public, signer)
}

func (p pki) writeKeyPair(name string, certDER []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(p.path(name+".key"), "EC PRIVATE KEY", keyDER); err != nil {
		return err
	}
	return writePEM(p.path(name+".crt"), "CERTIFICATE", certDER)
}

// serviceAccountKey returns the file of the service-account signing key called name,
// making it (RSA 2048, as kubeadm's sa.key) if it does not exist.
func (p pki) serviceAccountKey(name string) (string, error) {
	path := p.path("sa-" + name + ".key")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	return path, writePEM(path, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

// writeKubeconfig writes the admin kubeconfig for the API server at url, with the
// certificates embedded so that the file works wherever it is copied.
func (p pki) writeKubeconfig(path, url string) error {
	data := map[string]string{}
	for _, name := range []string{"ca.crt", "admin.crt", "admin.key"} {
		content, err := os.ReadFile(p.path(name))
		if err != nil {
			return err
		}
		data[name] = base64.StdEncoding.EncodeToString(content)
	}
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: argo-results-test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: kubernetes-admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: kubernetes-admin@argo-results-test
  context:
    cluster: argo-results-test
    user: kubernetes-admin
    namespace: default
current-context: kubernetes-admin@argo-results-test
`, url, data["ca.crt"], data["admin.crt"], data["admin.key"])
	return os.WriteFile(path, []byte(config), 0o600)
}
