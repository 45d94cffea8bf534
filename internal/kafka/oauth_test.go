package kafka

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/provision"
)

// tokenEndpoint is an OAuth 2.0 client-credentials token endpoint that issues
// unsecured JWTs for subject, counting the grants it answered.
func tokenEndpoint(t *testing.T, clientID, secret, subject string) (string, *atomic.Int64) {
	t.Helper()
	grants := new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, sec, ok := r.BasicAuth()
		if r.Method != http.MethodPost || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" ||
			r.PostForm.Get("scope") != "kafka" {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		if !ok || id != clientID || sec != secret {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		grants.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"` + testenv.UnsecuredJWT(subject, time.Hour) + `","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, grants
}

// oauthOptions reaches the secured broker's OAUTHBEARER listener at 127.0.0.1,
// whose certificate names only provision.OAuthServerName.
func oauthOptions(s *testenv.Secured, serverName string, o OAuthOptions) Options {
	return Options{
		Brokers:  s.OAuthBrokers,
		ClientID: "larkline-oauth-test",
		TLS:      TLSOptions{Enabled: true, CAFile: s.CAFile, ServerName: serverName},
		SASL:     SASLOptions{Mechanism: "oauthbearer", OAuth: o},
	}
}

// TestOAuthBearerOnTheRealBroker: the real broker with an OAUTHBEARER listener
// (Kafka's unsecured JWT validator) and ACLs. A token from a file and one from a
// client-credentials endpoint both authenticate franz-go's client (produce, then
// read back) and sarama's (Goka's producer): the principal is the token's subject,
// granted only its topic. The endpoint is asked once per client, not per connection.
// An expired token is refused by the broker.
func TestOAuthBearerOnTheRealBroker(t *testing.T) {
	s := testenv.SecuredKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	subject := uniqueName(t, "oauth")
	topic := uniqueName(t, "oauth-topic")
	if _, err := s.Admin().CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = s.Admin().DeleteTopics(context.Background(), topic) })
	for _, op := range []string{"Write", "Read", "Describe"} {
		s.Grant(t, testenv.ACL{Principal: "User:" + subject, Operation: op, Resource: "topic", Name: topic})
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(testenv.UnsecuredJWT(subject, time.Hour)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url, grants := tokenEndpoint(t, "larkline", "client-secret-1", subject)

	for _, tc := range []struct {
		name string
		o    OAuthOptions
	}{
		{"token file", OAuthOptions{TokenFile: tokenFile}},
		{"client credentials", OAuthOptions{TokenURL: url, ClientID: "larkline", ClientSecret: "client-secret-1", Scope: "kafka"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := oauthOptions(s, provision.OAuthServerName, tc.o)
			value := []byte(tc.name)

			// sarama, as Goka's producer builds it
			cfg, _, err := saramaConfig(GokaOptions{Options: o, TableReplication: 1, StreamReplication: 1})
			if err != nil {
				t.Fatal(err)
			}
			sp, err := sarama.NewSyncProducer(o.Brokers, cfg)
			if err != nil {
				t.Fatalf("sarama producer over OAUTHBEARER: %v", err)
			}
			if _, _, err := sp.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(value)}); err != nil {
				t.Fatalf("sarama produce over OAUTHBEARER: %v", err)
			}
			if err := sp.Close(); err != nil {
				t.Fatal(err)
			}

			// franz-go, as every other stage builds it: read the record back
			opts, err := NewClientOptions(o)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
				t.Fatalf("franz-go produce over OAUTHBEARER: %v", err)
			}
			seen := 0
			for seen < 2 {
				fs := cl.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					t.Fatalf("franz-go fetch over OAUTHBEARER: %v", err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					if string(r.Value) == tc.name {
						seen++
					}
				})
			}
		})
	}
	// One grant per client (sarama's, franz-go's), each reused for every connection
	// of its client (bootstrap, then the broker; producer and consumer).
	if n := grants.Load(); n != 2 {
		t.Fatalf("the token endpoint answered %d grants, want 2 (one per client: a token is reused until near its expiry)", n)
	}

	t.Run("expired token refused", func(t *testing.T) {
		expired := filepath.Join(t.TempDir(), "expired")
		if err := os.WriteFile(expired, []byte(testenv.UnsecuredJWT(subject, -time.Minute)), 0o600); err != nil {
			t.Fatal(err)
		}
		err := pingOnce(t, oauthOptions(s, provision.OAuthServerName, OAuthOptions{TokenFile: expired}))
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "sasl") {
			t.Fatalf("ping with an expired token: %v, want a SASL authentication failure", err)
		}
	})
}

// pingOnce builds a franz-go client of o and pings the brokers once, without retries.
func pingOnce(t *testing.T, o Options) error {
	t.Helper()
	opts, err := NewClientOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestTLSServerName: the OAUTHBEARER listener's certificate names
// provision.OAuthServerName, not 127.0.0.1, the bootstrap address. Without
// TLS.ServerName the client refuses the certificate; with it, it connects.
func TestTLSServerName(t *testing.T) {
	s := testenv.SecuredKafka(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(testenv.UnsecuredJWT(uniqueName(t, "sni"), time.Hour)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, serverName string
		wantErr          string
	}{
		{"bootstrap host only", "", "certificate"},
		{"server name", provision.OAuthServerName, ""},
		{"wrong server name", "other.larkline.test", "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pingOnce(t, oauthOptions(s, tc.serverName, OAuthOptions{TokenFile: tokenFile}))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("ping: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("ping: %v, want an error about the %s", err, tc.wantErr)
			}
			if err != nil {
				t.Logf("refused: %v", err)
			}
		})
	}
}

// TestOAuthTokenSource: the client-credentials grant's failures name the endpoint's
// status and never carry the secret; a token file that is empty is refused.
func TestOAuthTokenSource(t *testing.T) {
	url, _ := tokenEndpoint(t, "larkline", "right-secret", "x")
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    OAuthOptions
		want string
	}{
		{"wrong secret", OAuthOptions{TokenURL: url, ClientID: "larkline", ClientSecret: "wrong-secret", Scope: "kafka"}, "HTTP 401"},
		{"no scope", OAuthOptions{TokenURL: url, ClientID: "larkline", ClientSecret: "right-secret"}, "HTTP 400"},
		{"empty file", OAuthOptions{TokenFile: empty}, "is empty"},
		{"missing file", OAuthOptions{TokenFile: empty + ".absent"}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newTokenSource(tc.o).Token(context.Background())
			if !errors.Is(err, ErrOAuthToken) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret") {
				t.Fatalf("error %v, want ErrOAuthToken saying %q and no secret", err, tc.want)
			}
		})
	}
}
