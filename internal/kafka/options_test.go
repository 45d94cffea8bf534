package kafka

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// testPKI writes a self-signed CA and a certificate/key pair it signed to dir. The
// certificate is valid for 127.0.0.1 and "localhost".
type testPKI struct {
	caFile, certFile, keyFile string
	serverCert                tls.Certificate
	pool                      *x509.CertPool
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "larkline test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{
		caFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "cert.pem"),
		keyFile:  filepath.Join(dir, "key.pem"),
	}
	write := func(path, typ string, b []byte) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(p.caFile, "CERTIFICATE", caDER)
	write(p.certFile, "CERTIFICATE", der)
	write(p.keyFile, "EC PRIVATE KEY", keyDER)
	p.serverCert, err = tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	return p
}

func validOptions() Options {
	return Options{Brokers: []string{"127.0.0.1:9092"}}
}

func TestNewClientOptionsRejectsInvalidOptions(t *testing.T) {
	pki := newTestPKI(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		modify func(*Options)
		want   string // substring of the error
	}{
		{"no brokers", func(o *Options) { o.Brokers = nil }, "at least one"},
		{"broker without port", func(o *Options) { o.Brokers = []string{"localhost"} }, "\"localhost\" must be host:port"},
		{"broker with bad port", func(o *Options) { o.Brokers = []string{"localhost:99999"} }, "port between 1 and 65535"},
		{"broker without host", func(o *Options) { o.Brokers = []string{":9092"} }, "must name a host"},
		{"client id with space", func(o *Options) { o.ClientID = "lark line" }, "ClientID"},
		{"unknown acks", func(o *Options) { o.Producer.Acks = "some" }, "Producer.Acks"},
		{"idempotence with leader acks", func(o *Options) { o.Producer.Acks = AcksLeader }, "must be all while the producer is idempotent"},
		{"idempotence with no acks", func(o *Options) { o.Producer.Acks = AcksNone }, "must be all while the producer is idempotent"},
		{"negative linger", func(o *Options) { o.Producer.Linger = new(-5 * time.Millisecond) }, "Producer.Linger"},
		{"huge linger", func(o *Options) { o.Producer.Linger = new(time.Hour) }, "Producer.Linger"},
		{"negative buffer", func(o *Options) { o.Producer.MaxBufferedRecords = -1 }, "Producer.MaxBufferedRecords"},
		{"unknown compression", func(o *Options) { o.Producer.Compression = "brotli" }, "Producer.Compression"},
		{"negative delivery timeout", func(o *Options) { o.Producer.DeliveryTimeout = -time.Second }, "Producer.DeliveryTimeout"},
		{"session timeout too long", func(o *Options) { o.Consumer.SessionTimeout = 2 * time.Hour }, "Consumer.SessionTimeout"},
		{"session timeout below the broker's minimum", func(o *Options) { o.Consumer.SessionTimeout = 5 * time.Second }, "group.min.session.timeout.ms"},
		{"negative rebalance timeout", func(o *Options) { o.Consumer.RebalanceTimeout = -1 }, "Consumer.RebalanceTimeout"},
		{"negative fetch wait", func(o *Options) { o.Consumer.FetchMaxWait = -1 }, "Consumer.FetchMaxWait"},
		{"unknown sasl mechanism", func(o *Options) { o.SASL = SASLOptions{Mechanism: "GSSAPI", Username: "u", Password: "p"} }, "SASL.Mechanism"},
		{"sasl without password", func(o *Options) { o.SASL = SASLOptions{Mechanism: "plain", Username: "u"} }, "needs a username and a password"},
		{"sasl credentials without mechanism", func(o *Options) { o.SASL = SASLOptions{Username: "u", Password: "p"} }, "is set but the SASL mechanism is empty"},
		{"oauthbearer without tls", func(o *Options) { o.SASL = SASLOptions{Mechanism: "oauthbearer", OAuth: OAuthOptions{TokenFile: "/t"}} }, "sends the token in clear"},
		{"oauthbearer without a token source", func(o *Options) { o.TLS.Enabled, o.SASL = true, SASLOptions{Mechanism: "oauthbearer"} }, "exactly one of a token file and a token endpoint"},
		{"oauthbearer with two token sources", func(o *Options) {
			o.TLS.Enabled, o.SASL = true, SASLOptions{Mechanism: "oauthbearer", OAuth: OAuthOptions{TokenFile: "/t", TokenURL: "https://idp/token", ClientID: "c", ClientSecret: "s"}}
		}, "exactly one of"},
		{"oauthbearer endpoint without client", func(o *Options) {
			o.TLS.Enabled, o.SASL = true, SASLOptions{Mechanism: "oauthbearer", OAuth: OAuthOptions{TokenURL: "https://idp/token"}}
		}, "client secret are needed"},
		{"oauthbearer endpoint over http", func(o *Options) {
			o.TLS.Enabled, o.SASL = true, SASLOptions{Mechanism: "oauthbearer", OAuth: OAuthOptions{TokenURL: "http://idp.example/token", ClientID: "c", ClientSecret: "s"}}
		}, "use https"},
		{"oauthbearer with a password", func(o *Options) {
			o.TLS.Enabled, o.SASL = true, SASLOptions{Mechanism: "oauthbearer", Username: "u", OAuth: OAuthOptions{TokenFile: "/t"}}
		}, "takes a token"},
		{"oauth settings without oauthbearer", func(o *Options) { o.SASL = SASLOptions{OAuth: OAuthOptions{TokenFile: "/t"}} }, "not OAUTHBEARER"},
		{"tls files while disabled", func(o *Options) { o.TLS = TLSOptions{CAFile: pki.caFile} }, "not enabled"},
		{"tls missing ca file", func(o *Options) { o.TLS = TLSOptions{Enabled: true, CAFile: "/nonexistent/ca.pem"} }, "ca file"},
		{"tls ca file without certificates", func(o *Options) { o.TLS = TLSOptions{Enabled: true, CAFile: notPEM} }, "no PEM certificate"},
		{"tls cert without key", func(o *Options) { o.TLS = TLSOptions{Enabled: true, CertFile: pki.certFile} }, "together"},
		{"tls key that is not a key", func(o *Options) {
			o.TLS = TLSOptions{Enabled: true, CertFile: pki.certFile, KeyFile: notPEM}
		}, "client certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions()
			tt.modify(&o)
			opts, err := NewClientOptions(o)
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("err = %v, want ErrInvalidOptions", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %q, want it to mention %q", err, tt.want)
			}
			if opts != nil {
				t.Fatalf("options returned with an error")
			}
			if strings.Contains(err.Error(), "p\"") && o.SASL.Password != "" {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

func TestNewClientOptionsSetsEverySettingExplicitly(t *testing.T) {
	pki := newTestPKI(t)
	tests := []struct {
		name  string
		in    Options
		check func(t *testing.T, cl *kgo.Client)
	}{
		{"defaults", validOptions(), func(t *testing.T, cl *kgo.Client) {
			wantOpt(t, cl, kgo.ClientID, DefaultClientID)
			wantOpt(t, cl, kgo.RequiredAcks, kgo.AllISRAcks())
			wantOpt(t, cl, kgo.ProducerLinger, DefaultLinger)
			wantOpt(t, cl, kgo.MaxBufferedRecords, int64(DefaultMaxBufferedRecords))
			wantOpt(t, cl, kgo.RecordDeliveryTimeout, time.Duration(0))
			wantOpt(t, cl, kgo.SessionTimeout, DefaultSessionTimeout)
			wantOpt(t, cl, kgo.HeartbeatInterval, 3*time.Second)
			wantOpt(t, cl, kgo.RebalanceTimeout, DefaultRebalanceTimeout)
			wantOpt(t, cl, kgo.FetchMaxWait, DefaultFetchMaxWait)
			wantOpt(t, cl, kgo.DisableIdempotentWrite, false)
			codecs, _ := cl.OptValue(kgo.ProducerBatchCompression).([]kgo.CompressionCodec)
			if len(codecs) != 1 || codecs[0] != kgo.SnappyCompression() {
				t.Fatalf("compression = %v, want snappy only", codecs)
			}
			if cl.OptValue(kgo.DialTLSConfig) != (*tls.Config)(nil) {
				t.Fatalf("TLS configured without TLS options")
			}
		}},
		{"explicit values", Options{
			Brokers:  []string{"127.0.0.1:9092", "localhost:9093"},
			ClientID: "larkline-ingest",
			Producer: ProducerOptions{
				Acks: AcksLeader, DisableIdempotence: true, Linger: new(time.Duration(0)),
				MaxBufferedRecords: 7, Compression: CompressionZstd, DeliveryTimeout: time.Second,
			},
			Consumer: ConsumerOptions{SessionTimeout: 6 * time.Second, RebalanceTimeout: 20 * time.Second, FetchMaxWait: time.Second},
		}, func(t *testing.T, cl *kgo.Client) {
			wantOpt(t, cl, kgo.ClientID, "larkline-ingest")
			wantOpt(t, cl, kgo.RequiredAcks, kgo.LeaderAck())
			wantOpt(t, cl, kgo.DisableIdempotentWrite, true)
			wantOpt(t, cl, kgo.ProducerLinger, time.Duration(0))
			wantOpt(t, cl, kgo.MaxBufferedRecords, int64(7))
			wantOpt(t, cl, kgo.RecordDeliveryTimeout, time.Second)
			wantOpt(t, cl, kgo.SessionTimeout, 6*time.Second)
			wantOpt(t, cl, kgo.HeartbeatInterval, 2*time.Second) // a third of the session
			wantOpt(t, cl, kgo.RebalanceTimeout, 20*time.Second)
			wantOpt(t, cl, kgo.FetchMaxWait, time.Second)
			codecs, _ := cl.OptValue(kgo.ProducerBatchCompression).([]kgo.CompressionCodec)
			if len(codecs) != 1 || codecs[0] != kgo.ZstdCompression() {
				t.Fatalf("compression = %v, want zstd only", codecs)
			}
		}},
		{"tls with client certificate", Options{
			Brokers: []string{"127.0.0.1:9092"},
			TLS:     TLSOptions{Enabled: true, CAFile: pki.caFile, CertFile: pki.certFile, KeyFile: pki.keyFile, ServerName: "localhost"},
		}, func(t *testing.T, cl *kgo.Client) {
			tc, _ := cl.OptValue(kgo.DialTLSConfig).(*tls.Config)
			if tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "localhost" || tc.MinVersion != tls.VersionTLS12 {
				t.Fatalf("tls config = %+v", tc)
			}
		}},
		{"sasl scram", Options{
			Brokers: []string{"127.0.0.1:9092"},
			SASL:    SASLOptions{Mechanism: "scram-sha-512", Username: "u", Password: "p"},
		}, func(t *testing.T, cl *kgo.Client) {
			vals := cl.OptValues(kgo.SASL)
			if len(vals) != 1 {
				t.Fatalf("SASL values = %v", vals)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := NewClientOptions(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(opts...) // does not connect until used
			if err != nil {
				t.Fatalf("franz-go rejected the options: %v", err)
			}
			defer cl.Close()
			tt.check(t, cl)
		})
	}
}

func wantOpt(t *testing.T, cl *kgo.Client, opt, want any) {
	t.Helper()
	if got := cl.OptValue(opt); got != want {
		t.Fatalf("option %T = %v (%T), want %v (%T)", opt, got, got, want, want)
	}
}

func TestWithDefaultsKeepsExplicitValues(t *testing.T) {
	in := Options{Brokers: []string{"b:1"}, ClientID: "x", Producer: ProducerOptions{Linger: new(time.Second)}}
	got := in.WithDefaults()
	if got.ClientID != "x" || *got.Producer.Linger != time.Second {
		t.Fatalf("explicit values changed: %+v", got)
	}
	if got.Producer.Acks != AcksAll || got.Producer.Compression != DefaultCompression || got.Consumer.FetchMaxWait != DefaultFetchMaxWait {
		t.Fatalf("defaults not applied: %+v", got)
	}
}

func TestGroupConsumerOptions(t *testing.T) {
	tests := []struct {
		name       string
		in         GroupConsumer
		wantErr    bool
		autoCommit bool
	}{
		{"defaults: manual commit, from the start", GroupConsumer{Group: "g", Topics: []string{"t"}}, false, false},
		{"auto commit, from the end", GroupConsumer{Group: "g", Topics: []string{"t"}, AutoCommit: true, StartAtEnd: true}, false, true},
		{"no group", GroupConsumer{Topics: []string{"t"}}, true, false},
		{"no topics", GroupConsumer{Group: "g"}, true, false},
		{"bad topic", GroupConsumer{Group: "g", Topics: []string{"a/b"}}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gopts, err := GroupConsumerOptions(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidOptions) {
					t.Fatalf("err = %v, want ErrInvalidOptions", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			base, err := NewClientOptions(validOptions())
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(append(base, gopts...)...)
			if err != nil {
				t.Fatalf("franz-go rejected the options: %v", err)
			}
			defer cl.Close()
			wantOpt(t, cl, kgo.ConsumerGroup, tt.in.Group)
			wantOpt(t, cl, kgo.DisableAutoCommit, !tt.autoCommit)
			reset, _ := cl.OptValue(kgo.ConsumeResetOffset).(kgo.Offset)
			want := kgo.NewOffset().AtStart()
			if tt.in.StartAtEnd {
				want = kgo.NewOffset().AtEnd()
			}
			if reset.String() != want.String() {
				t.Fatalf("reset offset = %v, want %v", reset, want)
			}
		})
	}
}
