package larkapi

import (
	"context"
	"sync"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
)

// tokens is the token cache of every SDK client in the process. The SDK's own never
// drops an entry before it expires: a tenant token Lark refuses (revoked, the app
// re-authorized) was sent again on every call for up to two hours, and the SDK's one
// repeat of a refused request reuses it too. answerError forgets every cached token
// when Lark calls one invalid, so the next call fetches a new one.
var tokens = &tokenCache{m: map[string]cachedToken{}}

// The SDK keeps its token manager in a package variable, and lark.WithTokenCache
// replaces it every time a client is built, unsynchronized with the requests of the
// clients already running: building a client while another calls Lark was a data
// race (parallel demo runs in one test binary met it). larkline installs its cache
// once, when this package is initialized, before any client exists; NewSDK never
// passes it again, and every client of the process, NewSDK's or not, uses it.
func init() {
	lark.NewClient("", "", lark.WithTokenCache(tokens), lark.WithLogLevel(larkcore.LogLevelError))
}

type cachedToken struct {
	value   string
	expires time.Time
}

// tokenCache implements the SDK's larkcore.Cache.
type tokenCache struct {
	mu sync.Mutex
	m  map[string]cachedToken
}

func (c *tokenCache) Get(_ context.Context, key string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[key]
	if !ok || !time.Now().Before(t.expires) {
		delete(c.m, key)
		return "", nil
	}
	return t.value, nil
}

func (c *tokenCache) Set(_ context.Context, key, value string, ttl time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = cachedToken{value: value, expires: time.Now().Add(ttl)}
	return nil
}

// forget drops every cached token. A process talks to Lark as one app, so the tokens
// of other apps (tests only) are merely fetched again.
func (c *tokenCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
}

// isTokenCode reports whether code says the token sent was refused.
func isTokenCode(code int) bool {
	switch code {
	case CodeTenantTokenBad, CodeAppTokenBad, CodeTokenFormat:
		return true
	}
	return false
}
