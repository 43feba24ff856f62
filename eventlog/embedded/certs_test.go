package embedded

import (
	"bytes"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDevCertsKeepCA: making the development certificates again over a
// folder that holds a CA replaced ca.pem and ca-key.pem, and every
// workstation refused the hub after its restart. Now it is refused and
// writes nothing; RenewHubCert issues a new hub certificate from the CA,
// which stays, for the old certificate's names.
func TestDevCertsKeepCA(t *testing.T) {
	dir := t.TempDir()
	if err := GenerateDevCerts(dir, []string{"hub.lan", "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	read := func(n string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ca, caKey, cert := read(DevCerts.CA), read(DevCerts.CAKey), read(DevCerts.Cert)
	var exists *CAExistsError
	if err := GenerateDevCerts(dir, []string{"other"}); !errors.As(err, &exists) || len(exists.Files) != 2 {
		t.Errorf("again over a CA: %v, want a CAExistsError naming ca.pem and ca-key.pem", err)
	}
	if !bytes.Equal(read(DevCerts.CA), ca) || !bytes.Equal(read(DevCerts.CAKey), caKey) || !bytes.Equal(read(DevCerts.Cert), cert) {
		t.Fatal("a refused GenerateDevCerts changed the files")
	}
	// The CA outlives its hub certificates, so a renewal can be valid
	// a year again.
	caCert, _ := ReadCert(filepath.Join(dir, DevCerts.CA))
	if left := time.Until(caCert.NotAfter); left < 9*365*24*time.Hour {
		t.Errorf("the CA is valid %v more, want ten years", left)
	}
	c, err := RenewHubCert(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(c.NotAfter); left < 364*24*time.Hour || left > 366*24*time.Hour {
		t.Errorf("the renewed certificate is valid %v more, want a year", left)
	}
	if !bytes.Equal(read(DevCerts.CA), ca) || !bytes.Equal(read(DevCerts.CAKey), caKey) {
		t.Error("renewing changed the CA")
	}
	if bytes.Equal(read(DevCerts.Cert), cert) {
		t.Error("renewing kept the old hub certificate")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	for _, host := range []string{"hub.lan", "127.0.0.1"} {
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("the renewed certificate for %s: %v", host, err)
		}
	}
	if c, err = RenewHubCert(dir, []string{"hub2.lan"}); err != nil || len(c.DNSNames) != 1 || c.DNSNames[0] != "hub2.lan" {
		t.Errorf("renewed for other names: %v %v", c, err)
	}
	os.Remove(filepath.Join(dir, DevCerts.CAKey))
	if _, err := RenewHubCert(dir, nil); err == nil {
		t.Error("renewed without the CA's key")
	}
}
