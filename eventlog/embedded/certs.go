package embedded

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/pisyncd/pisyncd/internal/fsutil"
)

// DevCerts names the files GenerateDevCerts writes.
var DevCerts = struct{ CA, CAKey, Cert, Key string }{"ca.pem", "ca-key.pem", "hub.pem", "hub-key.pem"}

// GenerateDevCerts makes a development CA and one hub certificate signed by
// it, valid for hosts (names or IPs) as server and as client (hub nodes
// dial each other's routes with it), for one year. Keys are 0600. For real
// deployments use your organisation's CA instead (docs/CLUSTER.md).
func GenerateDevCerts(dir string, hosts []string) error {
	if len(hosts) == 0 {
		return fmt.Errorf("dev certs: no host names")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "pisyncd dev CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, h)
		}
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	write := func(name, typ string, der []byte) error {
		return fsutil.WriteFileAtomic(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	caKeyDER, _ := x509.MarshalECPrivateKey(caKey)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	for _, f := range []struct {
		name, typ string
		der       []byte
	}{{DevCerts.CA, "CERTIFICATE", caDER}, {DevCerts.CAKey, "EC PRIVATE KEY", caKeyDER}, {DevCerts.Cert, "CERTIFICATE", leafDER}, {DevCerts.Key, "EC PRIVATE KEY", keyDER}} {
		if err := write(f.name, f.typ, f.der); err != nil {
			return err
		}
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}
