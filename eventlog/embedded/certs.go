package embedded

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/pisyncd/pisyncd/internal/fsutil"
)

// DevCerts names the files GenerateDevCerts writes.
var DevCerts = struct{ CA, CAKey, Cert, Key string }{"ca.pem", "ca-key.pem", "hub.pem", "hub-key.pem"}

// devCertLife is how long a development hub certificate is valid, and
// devCALife its CA (docs/HUB.md, "Certificate expiry"): the CA outlives
// the certificates it signs, so `hub certs --renew` can issue the next
// one without giving every workstation a new ca.pem. (Before, the CA
// ended with the first certificate, and a renewal could not outlive it.)
const devCertLife, devCALife = 1, 10 // years

// CAExistsError is GenerateDevCerts' refusal of a folder that holds a CA
// already: a new one would make every workstation, which trusts the old
// one (PISYNC_HUB_CA), refuse the hub once it restarts with a certificate
// of the new.
type CAExistsError struct {
	Dir   string
	Files []string // which of ca.pem and ca-key.pem are there
}

func (e *CAExistsError) Error() string {
	return fmt.Sprintf("%s holds a CA already (%v)", e.Dir, e.Files)
}

// GenerateDevCerts makes a development CA (valid ten years) and one hub
// certificate signed by it, valid for hosts (names or IPs) as server and
// as client (hub nodes dial each other's routes with it), for one year.
// Keys are 0600. It
// refuses a dir that holds ca.pem or ca-key.pem (*CAExistsError):
// RenewHubCert issues a new hub certificate from that CA, ReplaceDevCerts
// replaces it. For real deployments use your organisation's CA instead
// (docs/CLUSTER.md).
func GenerateDevCerts(dir string, hosts []string) error {
	var found []string
	for _, n := range []string{DevCerts.CA, DevCerts.CAKey} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			found = append(found, n)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("dev certs: %w", err)
		}
	}
	if len(found) > 0 {
		return &CAExistsError{Dir: dir, Files: found}
	}
	return ReplaceDevCerts(dir, hosts)
}

// ReplaceDevCerts is GenerateDevCerts over whatever CA dir holds: a hub
// certificate of the new CA is refused by every workstation until it has
// the new ca.pem.
func ReplaceDevCerts(dir string, hosts []string) error {
	if len(hosts) == 0 {
		return fmt.Errorf("dev certs: no host names")
	}
	if err := fsutil.MkdirAllKeepOwner(dir); err != nil {
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
		NotAfter:              now.AddDate(devCALife, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	caKeyDER, _ := x509.MarshalECPrivateKey(caKey)
	if err := writePEM(dir, DevCerts.CA, "CERTIFICATE", caDER); err != nil {
		return err
	}
	if err := writePEM(dir, DevCerts.CAKey, "EC PRIVATE KEY", caKeyDER); err != nil {
		return err
	}
	_, err = issueHubCert(dir, hosts, caCert, caKey, now)
	return err
}

// RenewHubCert issues a new hub certificate (hub.pem, hub-key.pem) in dir
// from the CA there (ca.pem, ca-key.pem), which stays as it is, so the
// workstations keep trusting the hub. It is valid for hosts, or, if none,
// for the names of the hub certificate it replaces, for a year but not
// past the CA's own end. It returns the new certificate.
func RenewHubCert(dir string, hosts []string) (*x509.Certificate, error) {
	caCert, err := ReadCert(filepath.Join(dir, DevCerts.CA))
	if err != nil {
		return nil, fmt.Errorf("renew: the CA: %w", err)
	}
	caKey, err := readKey(filepath.Join(dir, DevCerts.CAKey))
	if err != nil {
		return nil, fmt.Errorf("renew: the CA's key: %w", err)
	}
	if len(hosts) == 0 {
		old, err := ReadCert(filepath.Join(dir, DevCerts.Cert))
		if err != nil {
			return nil, fmt.Errorf("renew: no host names given, and none from the hub certificate: %w", err)
		}
		hosts = append(hosts, old.DNSNames...)
		for _, ip := range old.IPAddresses {
			hosts = append(hosts, ip.String())
		}
		if len(hosts) == 0 {
			return nil, fmt.Errorf("renew: no host names given, and %s names none", filepath.Join(dir, DevCerts.Cert))
		}
	}
	return issueHubCert(dir, hosts, caCert, caKey, time.Now())
}

func issueHubCert(dir string, hosts []string, caCert *x509.Certificate, caKey crypto.Signer, now time.Time) (*x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(devCertLife, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if leaf.NotAfter.After(caCert.NotAfter) {
		leaf.NotAfter = caCert.NotAfter // not trusted past it anyway
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	if err := writePEM(dir, DevCerts.Key, "EC PRIVATE KEY", keyDER); err != nil {
		return nil, err
	}
	if err := writePEM(dir, DevCerts.Cert, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func writePEM(dir, name, typ string, der []byte) error {
	return fsutil.ReplaceFileKeepOwner(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

// ReadCert reads the first certificate of a PEM file.
func ReadCert(path string) (*x509.Certificate, error) {
	b, err := fsutil.ReadSetting(path, fsutil.SettingMax)
	if err != nil {
		return nil, err
	}
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return nil, fmt.Errorf("%s: no certificate in it", path)
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}

func readKey(path string) (crypto.Signer, error) {
	b, err := fsutil.ReadSetting(path, fsutil.SettingMax)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: no key in it", path)
	}
	if k, err := x509.ParseECPrivateKey(blk.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", path)
	}
	return s, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}
