package testenv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/larkline/larkline/internal/testenv"
)

// TestSecuredKafka: both listeners authenticate (SCRAM-SHA-512 over TLS, a client
// certificate), the authorizer refuses a principal without ACLs, and a prefixed ACL
// grants exactly its prefix.
func TestSecuredKafka(t *testing.T) {
	s := testenv.SecuredKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tc, err := s.ClientTLS("", "")
	if err != nil {
		t.Fatal(err)
	}
	user, pass := s.NewSCRAMUser(t, "t-scram")
	certUser, certFile, keyFile := s.NewCertUser(t, "t-cert")
	ctc, err := s.ClientTLS(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]struct {
		principal string
		opts      []kgo.Opt
	}{
		"sasl_ssl": {"User:" + user, []kgo.Opt{kgo.SeedBrokers(s.SASLBrokers...), kgo.DialTLSConfig(tc),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())}},
		"mtls": {"User:" + certUser, []kgo.Opt{kgo.SeedBrokers(s.MTLSBrokers...), kgo.DialTLSConfig(ctc)}},
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			cl, err := kgo.NewClient(append(c.opts, kgo.RequestRetries(1))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			prefix := "sec-" + name + "-" + time.Now().Format("150405.000000") + "."
			// no ACL: refused
			res, err := adm.CreateTopic(ctx, 1, 1, nil, prefix+"a")
			if err == nil {
				err = res.Err
			}
			if !errors.Is(err, kerr.TopicAuthorizationFailed) {
				t.Fatalf("creating a topic without an ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
			}
			s.Grant(t, testenv.ACL{Principal: c.principal, Operation: "Create", Resource: "topic", Name: prefix, Prefixed: true})
			// the grant is effective once the broker applied the metadata record: poll
			// on a ticker, bounded, until the create is no longer refused
			deadline := time.After(30 * time.Second)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
		poll:
			for {
				res, err = adm.CreateTopic(ctx, 1, 1, nil, prefix+"a")
				if err == nil {
					err = res.Err
				}
				if err == nil || !errors.Is(err, kerr.TopicAuthorizationFailed) {
					break
				}
				select {
				case <-deadline:
					break poll
				case <-tick.C:
				}
			}
			if err != nil {
				t.Fatalf("creating %sa under a prefixed Create ACL: %v", prefix, err)
			}
			res, err = adm.CreateTopic(ctx, 1, 1, nil, "other-"+prefix+"b")
			if err == nil {
				err = res.Err
			}
			if !errors.Is(err, kerr.TopicAuthorizationFailed) {
				t.Fatalf("creating a topic outside the prefix: %v, want TOPIC_AUTHORIZATION_FAILED", err)
			}
		})
	}
}
