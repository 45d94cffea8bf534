package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func validGokaOptions() GokaOptions {
	return GokaOptions{Options: validOptions(), TableReplication: 1, StreamReplication: 1}
}

func TestSaramaConfigRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*GokaOptions)
		want   string
	}{
		{"invalid base options", func(o *GokaOptions) { o.Brokers = nil }, "Brokers"},
		{"unparsable version", func(o *GokaOptions) { o.Version = "three" }, "Version three"},
		{"version below 2.1 (removed by Kafka 4)", func(o *GokaOptions) { o.Version = "2.0.0" }, "must be at least 2.1.0"},
		{"pre-1.0 version", func(o *GokaOptions) { o.Version = "0.10.2.0" }, "must be at least 2.1.0"},
		{"version unknown to sarama", func(o *GokaOptions) { o.Version = "9.0.0" }, "the newest sarama knows"},
		{"no table replication", func(o *GokaOptions) { o.TableReplication = 0 }, "TableReplication"},
		{"no stream replication", func(o *GokaOptions) { o.StreamReplication = 0 }, "StreamReplication"},
		{"negative stream retention", func(o *GokaOptions) { o.StreamRetention = -time.Second }, "StreamRetention"},
		{"unknown goka compression", func(o *GokaOptions) { o.Compression = "brotli" }, "Compression brotli"},
		{"acks none", func(o *GokaOptions) {
			o.Producer.Acks = AcksNone
			o.Producer.DisableIdempotence = true
		}, "acknowledged writes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validGokaOptions()
			tt.modify(&o)
			cfg, err := SaramaConfig(o)
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidOptions mentioning %q", err, tt.want)
			}
			if cfg != nil {
				t.Fatal("config returned with an error")
			}
			if _, err := NewGoka(o); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("NewGoka err = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestSaramaConfigSetsEverySettingExplicitly(t *testing.T) {
	tests := []struct {
		name  string
		in    GokaOptions
		check func(t *testing.T, c *sarama.Config)
	}{
		{"defaults", validGokaOptions(), func(t *testing.T, c *sarama.Config) {
			if c.Version != sarama.V3_6_0_0 {
				t.Errorf("Version = %s, want 3.6.0", c.Version)
			}
			if c.Producer.RequiredAcks != sarama.WaitForAll {
				t.Errorf("RequiredAcks = %v, want WaitForAll", c.Producer.RequiredAcks)
			}
			if !c.Producer.Idempotent || c.Net.MaxOpenRequests != 1 {
				t.Errorf("Idempotent = %v, MaxOpenRequests = %d; want true, 1", c.Producer.Idempotent, c.Net.MaxOpenRequests)
			}
			if c.Consumer.Offsets.Initial != sarama.OffsetOldest {
				t.Errorf("Offsets.Initial = %d, want OffsetOldest", c.Consumer.Offsets.Initial)
			}
			if c.Metadata.AllowAutoTopicCreation {
				t.Error("AllowAutoTopicCreation = true")
			}
			if c.ClientID != DefaultClientID {
				t.Errorf("ClientID = %q", c.ClientID)
			}
			if c.Producer.Flush.Frequency != DefaultLinger || c.Producer.Compression != sarama.CompressionLZ4 {
				t.Errorf("Flush.Frequency = %s, Compression = %v", c.Producer.Flush.Frequency, c.Producer.Compression)
			}
			if c.Consumer.Group.Session.Timeout != DefaultSessionTimeout || c.Consumer.Group.Rebalance.Timeout != DefaultRebalanceTimeout || c.Consumer.MaxWaitTime != DefaultFetchMaxWait {
				t.Errorf("consumer timeouts = %s %s %s", c.Consumer.Group.Session.Timeout, c.Consumer.Group.Rebalance.Timeout, c.Consumer.MaxWaitTime)
			}
			if c.Consumer.IsolationLevel != sarama.ReadCommitted {
				t.Errorf("IsolationLevel = %v", c.Consumer.IsolationLevel)
			}
			if len(c.Consumer.Group.Rebalance.GroupStrategies) != 1 || c.Consumer.Group.Rebalance.GroupStrategies[0].Name() != goka.CopartitioningStrategy.Name() {
				t.Errorf("rebalance strategies = %v, want goka's copartitioning strategy", c.Consumer.Group.Rebalance.GroupStrategies)
			}
			if c.Net.TLS.Enable || c.Net.SASL.Enable {
				t.Errorf("TLS %v, SASL %v enabled without options", c.Net.TLS.Enable, c.Net.SASL.Enable)
			}
		}},
		{"explicit values", GokaOptions{
			Options: Options{
				Brokers: []string{"127.0.0.1:9092"}, ClientID: "windows",
				Producer: ProducerOptions{Acks: AcksLeader, DisableIdempotence: true, Linger: new(time.Duration(0)), Compression: CompressionZstd},
				Consumer: ConsumerOptions{SessionTimeout: 6 * time.Second},
				SASL:     SASLOptions{Mechanism: SASLPlain, Username: "u", Password: "p"},
				// PLAIN without TLS is refused unless allowed (issue #29).
				AllowInsecure: true,
			},
			Version: "4.0.0", TableReplication: 3, StreamReplication: 2, Compression: CompressionZstd,
		}, func(t *testing.T, c *sarama.Config) {
			if c.Version != sarama.V4_0_0_0 || c.ClientID != "windows" {
				t.Errorf("Version, ClientID = %s, %q", c.Version, c.ClientID)
			}
			if c.Producer.RequiredAcks != sarama.WaitForLocal || c.Producer.Idempotent {
				t.Errorf("RequiredAcks = %v, Idempotent = %v", c.Producer.RequiredAcks, c.Producer.Idempotent)
			}
			if c.Net.MaxOpenRequests != 1 {
				t.Errorf("MaxOpenRequests = %d, want 1 even without idempotence (ordering)", c.Net.MaxOpenRequests)
			}
			if c.Producer.Flush.Frequency != 0 || c.Producer.Compression != sarama.CompressionZSTD {
				t.Errorf("Flush.Frequency = %s, Compression = %v", c.Producer.Flush.Frequency, c.Producer.Compression)
			}
			// Linger 0 must send at once: any remaining trigger (Goka's default sets
			// Flush.Bytes to 64 KiB) would hold a quiet processor's writes forever.
			if c.Producer.Flush.Bytes != 0 || c.Producer.Flush.Messages != 0 {
				t.Errorf("Flush.Bytes = %d, Flush.Messages = %d with Linger 0, want 0 (send at once)", c.Producer.Flush.Bytes, c.Producer.Flush.Messages)
			}
			if c.Consumer.Group.Heartbeat.Interval != 2*time.Second {
				t.Errorf("Heartbeat.Interval = %s, want a third of the session timeout", c.Consumer.Group.Heartbeat.Interval)
			}
			if !c.Net.SASL.Enable || c.Net.SASL.Mechanism != sarama.SASLTypePlaintext || c.Net.SASL.User != "u" {
				t.Errorf("SASL = %+v", c.Net.SASL)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := SaramaConfig(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestGokaCopiesTheTemplatePerClient(t *testing.T) {
	g, err := NewGoka(validGokaOptions())
	if err != nil {
		t.Fatal(err)
	}
	a, b := g.SaramaConfig(), g.SaramaConfig()
	a.ClientID = "changed"
	if b.ClientID == "changed" || g.SaramaConfig().ClientID == "changed" {
		t.Fatal("SaramaConfig returns a shared config")
	}
	if n := len(g.ProcessorOptions()); n != 6 {
		t.Fatalf("ProcessorOptions has %d options, want 6", n)
	}
	if n := len(g.EmitterOptions()); n != 4 {
		t.Fatalf("EmitterOptions has %d options, want 4", n)
	}
	if n := len(g.ViewOptions()); n != 4 {
		t.Fatalf("ViewOptions has %d options, want 4", n)
	}
}

func TestSCRAMClientBeforeBegin(t *testing.T) {
	c := &scramClient{}
	if _, err := c.Step(""); !errors.Is(err, errSCRAMNotBegun) {
		t.Fatalf("Step before Begin: err = %v", err)
	}
	if err := c.Begin("", "", ""); err == nil {
		t.Fatal("Begin with empty credentials succeeded")
	}
}

// TestTLSAndSASLAgainstAuthenticatingBroker checks the TLS and SASL mapping of both
// clients against a broker that requires them. The dev broker has no TLS or SASL
// listener, so this uses franz-go's in-process kfake cluster configured for TLS and
// SCRAM/PLAIN: it is a test of the handshake mapping, not a stand-in for the real
// broker in the integration tests.
func TestTLSAndSASLAgainstAuthenticatingBroker(t *testing.T) {
	pki := newTestPKI(t)
	mechanisms := []string{SASLScramSHA256, SASLScramSHA512, SASLPlain}
	kopts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.EnableSASL(),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pki.serverCert}, MinVersion: tls.VersionTLS12}),
		kfake.SeedTopics(1, "t"),
	}
	for _, m := range mechanisms {
		kopts = append(kopts, kfake.Superuser(m, "user-"+strings.ToLower(m), "secret"))
	}
	c, err := kfake.NewCluster(kopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	tlsOpts := TLSOptions{Enabled: true, CAFile: pki.caFile}

	for _, m := range mechanisms {
		for _, password := range []string{"secret", "wrong"} {
			t.Run(m+"/password="+password, func(t *testing.T) {
				o := Options{
					Brokers: c.ListenAddrs(),
					TLS:     tlsOpts,
					SASL:    SASLOptions{Mechanism: m, Username: "user-" + strings.ToLower(m), Password: password},
				}
				ok := password == "secret"

				kopts, err := NewClientOptions(o)
				if err != nil {
					t.Fatal(err)
				}
				cl, err := kgo.NewClient(append(kopts, kgo.RetryTimeout(2*time.Second))...)
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err = kadm.NewClient(cl).ListTopics(ctx, "t")
				if ok && err != nil {
					t.Fatalf("franz-go: %v", err)
				}
				if !ok && err == nil {
					t.Fatal("franz-go authenticated with a wrong password")
				}

				cfg, err := SaramaConfig(GokaOptions{Options: o, Version: "3.6.0", TableReplication: 1, StreamReplication: 1})
				if err != nil {
					t.Fatal(err)
				}
				cfg.Metadata.Retry.Max = 0
				sc, err := sarama.NewClient(c.ListenAddrs(), cfg)
				if ok {
					if err != nil {
						t.Fatalf("sarama: %v", err)
					}
					defer sc.Close()
					if _, err := sc.Partitions("t"); err != nil {
						t.Fatalf("sarama partitions: %v", err)
					}
				} else if err == nil {
					sc.Close()
					t.Fatal("sarama authenticated with a wrong password")
				}
			})
		}
	}
}
