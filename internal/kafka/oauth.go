package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// SASLOAuthBearer is the OAUTHBEARER mechanism (RFC 7628): the SASL mechanism of
// managed clusters (Confluent Cloud, Azure Event Hubs, an OIDC-secured Kafka).
const SASLOAuthBearer = "OAUTHBEARER"

// OAuthOptions says where an OAUTHBEARER token comes from: a file (TokenFile), or
// an OAuth 2.0 client-credentials grant at TokenURL. Exactly one of the two.
type OAuthOptions struct {
	// TokenFile holds the token (whitespace trimmed). It is read again for every
	// authentication, so a sidecar or the platform may rotate it in place.
	TokenFile string
	// TokenURL is the token endpoint of the client-credentials grant (RFC 6749
	// §4.4): ClientID and ClientSecret authenticate with HTTP basic auth, Scope is
	// sent when set. A token is reused until a fifth of its lifetime is left.
	TokenURL     string
	ClientID     string
	ClientSecret string
	Scope        string
}

// Token endpoint bounds.
const (
	oauthRequestTimeout = 15 * time.Second
	maxTokenBytes       = 64 << 10
)

// ErrOAuthToken wraps every failure to obtain an OAUTHBEARER token. The error text
// names the file or endpoint and the HTTP status, never a token or secret.
var ErrOAuthToken = errors.New("kafka: cannot obtain an OAUTHBEARER token")

// tokenSource hands out OAUTHBEARER tokens to franz-go's and sarama's clients.
type tokenSource struct {
	o    OAuthOptions
	hc   *http.Client
	now  func() time.Time
	mu   sync.Mutex
	tok  string
	renw time.Time // renew the cached token from this instant on
}

func newTokenSource(o OAuthOptions) *tokenSource {
	return &tokenSource{o: o, now: time.Now, hc: &http.Client{Timeout: oauthRequestTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Token returns a token: the file's content, or a cached or fresh one from the
// token endpoint.
func (s *tokenSource) Token(ctx context.Context) (string, error) {
	if s.o.TokenFile != "" {
		b, err := os.ReadFile(s.o.TokenFile)
		if err != nil {
			return "", fmt.Errorf("%w: token file: %w", ErrOAuthToken, err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" || len(tok) > maxTokenBytes {
			return "", fmt.Errorf("%w: token file %s is empty or longer than %d bytes", ErrOAuthToken, s.o.TokenFile, maxTokenBytes)
		}
		return tok, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok != "" && s.now().Before(s.renw) {
		return s.tok, nil
	}
	tok, life, err := s.fetch(ctx)
	if err != nil {
		return "", err
	}
	s.tok, s.renw = tok, s.now().Add(life*4/5)
	return tok, nil
}

// fetch runs one client-credentials grant.
func (s *tokenSource) fetch(ctx context.Context) (string, time.Duration, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if s.o.Scope != "" {
		form.Set("scope", s.o.Scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrOAuthToken, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(s.o.ClientID), url.QueryEscape(s.o.ClientSecret))
	resp, err := s.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", 0, fmt.Errorf("%w: token endpoint: %w", ErrOAuthToken, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenBytes+1))
	if err != nil {
		return "", 0, fmt.Errorf("%w: token endpoint: %w", ErrOAuthToken, err)
	}
	var t struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
	}
	jerr := json.Unmarshal(body, &t)
	switch {
	case resp.StatusCode != http.StatusOK:
		return "", 0, fmt.Errorf("%w: token endpoint answered HTTP %d %.64q", ErrOAuthToken, resp.StatusCode, t.Error)
	case jerr != nil || len(body) > maxTokenBytes:
		return "", 0, fmt.Errorf("%w: token endpoint: the answer is not a JSON token response", ErrOAuthToken)
	case t.AccessToken == "" || !strings.EqualFold(t.TokenType, "bearer"):
		return "", 0, fmt.Errorf("%w: token endpoint: no bearer access_token in the answer", ErrOAuthToken)
	}
	life := time.Duration(t.ExpiresIn) * time.Second
	if t.ExpiresIn <= 0 || t.ExpiresIn > 24*3600 {
		life = 5 * time.Minute // no usable lifetime: ask again soon
	}
	return t.AccessToken, life, nil
}

// mechanism is franz-go's OAUTHBEARER mechanism on s.
func (s *tokenSource) mechanism() sasl.Mechanism {
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, err := s.Token(ctx)
		return oauth.Auth{Token: tok}, err
	})
}

// saramaTokens is sarama's AccessTokenProvider on a tokenSource.
type saramaTokens struct{ s *tokenSource }

func (p saramaTokens) Token() (*sarama.AccessToken, error) {
	ctx, cancel := context.WithTimeout(context.Background(), oauthRequestTimeout)
	defer cancel()
	tok, err := p.s.Token(ctx)
	if err != nil {
		return nil, err
	}
	return &sarama.AccessToken{Token: tok}, nil
}
