package provision

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Principals of the secured broker's own certificates. Both are super users: the
// broker's (inter-broker and controller traffic) and the admin's (test set-up).
const (
	SecuredBrokerPrincipal = "User:broker"
	SecuredAdminPrincipal  = "User:admin"
)

// OAuthServerName is the only name in the certificate of the OAUTHBEARER listener:
// a client reaching it at 127.0.0.1 verifies it only with this server name.
const OAuthServerName = "kafka.larkline.test"

// SecuredKafka is a real single-node KRaft broker run by kafka-jvm.sh with
//
//   - a SASL_SSL listener (SCRAM-SHA-512; TLS without client certificates),
//   - an SSL listener that requires a client certificate (mTLS, no SASL),
//   - a SASL_SSL listener with OAUTHBEARER and Kafka's unsecured JWT validator (an
//     unsigned token's sub claim is the principal), whose certificate names only
//     OAuthServerName, not the address clients connect to,
//   - the standard authorizer (org.apache.kafka.metadata.authorizer.StandardAuthorizer)
//     with allow.everyone.if.no.acl.found=false: a principal may do only what an ACL
//     grants it;
//   - the certificate principal mapped from the subject DN to its CN
//     (ssl.principal.mapping.rules RULE:^CN=([^,]+)(,.*)?$/$1/): a client certificate
//     with CN=alice is User:alice.
//
// The CA and every certificate are generated at start, in Go, under Dir; nothing is
// read from or written to the repository.
type SecuredKafka struct {
	// SASLBrokers, MTLSBrokers and OAuthBrokers are the bootstrap addresses of the
	// three client listeners.
	SASLBrokers  []string
	MTLSBrokers  []string
	OAuthBrokers []string
	// Dir holds the broker's data and the generated PEM files.
	Dir string
	// CAFile is the PEM CA that signs the broker's and every client's certificate.
	CAFile string
	// AdminCertFile and AdminKeyFile are the super user's client certificate
	// (User:admin) for the mTLS listener.
	AdminCertFile, AdminKeyFile string

	ca    *x509.Certificate
	caKey *rsa.PrivateKey
	proc  *scriptProc
}

// StartSecuredKafka starts a SecuredKafka in a fresh temporary directory on free
// ports. It needs what the jvm kind needs (Java 17+, the jar cache or Maven) and never
// falls back to anything else: any failure is returned.
func StartSecuredKafka(ctx context.Context, o Options) (*SecuredKafka, error) {
	s := &SecuredKafka{}
	// Ports: SASL_SSL and CONTROLLER (the script's two arguments), SSL, OAUTH. The
	// port the script waits for is the SASL_SSL listener's; a TCP accept is all it
	// checks, so the admin's requests (ready) are the real readiness test.
	sp, err := startScriptProc(ctx, o, "broker", jvmScript, EnvKafkaJars, 4, 2,
		func(dir string, ports []int) ([]string, func(context.Context) error, error) {
			s.Dir = dir
			s.SASLBrokers = []string{"127.0.0.1:" + strconv.Itoa(ports[0])}
			s.MTLSBrokers = []string{"127.0.0.1:" + strconv.Itoa(ports[2])}
			s.OAuthBrokers = []string{"127.0.0.1:" + strconv.Itoa(ports[3])}
			if err := s.writeMaterial(ports[0], ports[2], ports[1], ports[3]); err != nil {
				return nil, nil, err
			}
			return []string{"LARKLINE_KAFKA_EXTRA_PROPERTIES=" + filepath.Join(dir, "secured.properties")}, s.ready, nil
		})
	if err != nil {
		return nil, fmt.Errorf("starting the secured broker: %w", err)
	}
	s.proc = sp
	o.logger().Info("provision: kafka-jvm.sh (secured)", "dir", s.Dir)
	return s, nil
}

// Close stops the broker and removes its directory.
func (s *SecuredKafka) Close(ctx context.Context) error {
	if s == nil || s.proc == nil {
		return nil
	}
	return s.proc.Close(ctx)
}

// ready waits until the admin, over mTLS, gets metadata naming a broker and a
// controller, and can list ACLs (the authorizer is up).
func (s *SecuredKafka) ready(ctx context.Context) error {
	cl, err := s.AdminClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	err = brokerReady(ctx, kadm.NewClient(cl), func(ctx context.Context, adm *kadm.Client) error {
		_, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
		return err
	})
	if err != nil {
		return fmt.Errorf("secured kafka at %v did not answer the admin within %s: %w", s.MTLSBrokers, kafkaReadyTimeout, err)
	}
	return nil
}

// AdminClient is a franz-go client of the super user User:admin on the mTLS listener.
func (s *SecuredKafka) AdminClient(opts ...kgo.Opt) (*kgo.Client, error) {
	tc, err := s.ClientTLS(s.AdminCertFile, s.AdminKeyFile)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(s.MTLSBrokers...),
		kgo.ClientID("larkline-testenv-secured-admin"),
		kgo.DialTLSConfig(tc),
		kgo.DialTimeout(5 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("creating the secured admin client: %w", err)
	}
	return cl, nil
}

// ClientTLS is a TLS configuration that trusts the CA and, when certFile is set,
// presents that client certificate.
func (s *SecuredKafka) ClientTLS(certFile, keyFile string) (*tls.Config, error) {
	pool := x509.NewCertPool()
	pool.AddCert(s.ca)
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("loading the client certificate %s: %w", certFile, err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}

// NewClientCert writes a client certificate with subject CN=<cn>,O=larkline-test
// signed by the CA (principal User:<cn> on the mTLS listener) and its key, as PEM
// files under Dir, and returns their paths.
func (s *SecuredKafka) NewClientCert(cn string) (certFile, keyFile string, err error) {
	if cn == "" || strings.ContainsAny(cn, ",/\\=+") {
		return "", "", fmt.Errorf("%w: client certificate CN %q", ErrBadEnv, cn)
	}
	certPEM, keyPEM, err := s.sign(pkix.Name{CommonName: cn, Organization: []string{"larkline-test"}}, x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return "", "", err
	}
	dir := filepath.Join(s.Dir, "clients")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// writeMaterial generates the CA, the broker's and the admin's certificates, and
// secured.properties for kafka-jvm.sh with the four listeners' ports.
func (s *SecuredKafka) writeMaterial(sasl, ssl, controller, oauth int) error {
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating the CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "larkline-test-ca", Organization: []string{"larkline-test"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("creating the CA certificate: %w", err)
	}
	if s.ca, err = x509.ParseCertificate(der); err != nil {
		return err
	}
	s.caKey = caKey
	s.CAFile = filepath.Join(s.Dir, "ca.pem")
	if err := os.WriteFile(s.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	// The broker's keystore: its key (PKCS#8) and certificate in one PEM file. It is
	// a server certificate for the listeners and a client one towards the controller.
	bcert, bkey, err := s.sign(pkix.Name{CommonName: "broker", Organization: []string{"larkline-test"}},
		x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	keystore := filepath.Join(s.Dir, "broker-keystore.pem")
	if err := os.WriteFile(keystore, append(bkey, bcert...), 0o600); err != nil {
		return err
	}
	if s.AdminCertFile, s.AdminKeyFile, err = s.NewClientCert("admin"); err != nil {
		return err
	}
	// The OAUTHBEARER listener's certificate names only OAuthServerName.
	ocert, okey, err := s.sign(pkix.Name{CommonName: OAuthServerName, Organization: []string{"larkline-test"}},
		x509.ExtKeyUsageServerAuth, nil)
	if err != nil {
		return err
	}
	oauthKeystore := filepath.Join(s.Dir, "oauth-keystore.pem")
	if err := os.WriteFile(oauthKeystore, append(okey, ocert...), 0o600); err != nil {
		return err
	}
	props := fmt.Sprintf(`# Written by internal/testenv/provision/secured.go: SASL_SSL (SCRAM-SHA-512), mTLS, OAUTHBEARER, ACLs.
listeners=SASL_SSL://127.0.0.1:%[1]d,SSL://127.0.0.1:%[2]d,CONTROLLER://127.0.0.1:%[3]d,OAUTH://127.0.0.1:%[8]d
advertised.listeners=SASL_SSL://127.0.0.1:%[1]d,SSL://127.0.0.1:%[2]d,OAUTH://127.0.0.1:%[8]d
listener.security.protocol.map=SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SSL,OAUTH:SASL_SSL
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";
listener.name.oauth.ssl.keystore.type=PEM
listener.name.oauth.ssl.keystore.location=%[9]s
controller.listener.names=CONTROLLER
inter.broker.listener.name=SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location=%[4]s
ssl.truststore.type=PEM
ssl.truststore.location=%[5]s
ssl.client.auth=none
listener.name.ssl.ssl.client.auth=required
listener.name.controller.ssl.client.auth=required
ssl.principal.mapping.rules=RULE:^CN=([^,]+)(,.*)?$/$1/,DEFAULT
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=%[6]s;%[7]s
`, sasl, ssl, controller, keystore, s.CAFile, SecuredBrokerPrincipal, SecuredAdminPrincipal, oauth, oauthKeystore)
	return os.WriteFile(filepath.Join(s.Dir, "secured.properties"), []byte(props), 0o600)
}

// sign issues a certificate for name from the CA and returns it and its PKCS#8 key
// as PEM.
func (s *SecuredKafka) sign(name pkix.Name, usage x509.ExtKeyUsage, ips []net.IP, more ...x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      name,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  append([]x509.ExtKeyUsage{usage}, more...),
		IPAddresses:  ips,
	}
	switch {
	case ips != nil:
		tmpl.DNSNames = []string{"localhost"}
	case usage == x509.ExtKeyUsageServerAuth:
		tmpl.DNSNames = []string{name.CommonName} // a server named only by DNS (OAuthServerName)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca, &key.PublicKey, s.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the certificate of %s: %w", name.CommonName, err)
	}
	p8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), nil
}
