package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/larkline/larkline/schemas/ids"
)

// AllWorkspaces, alone in Token.Workspaces, grants every workspace.
const AllWorkspaces = "*"

// Token scopes (issue #29), each granting what the one before it does and more.
const (
	// ScopeRead (the default, also for an empty Scope) reads: the timeline, the
	// evidence, the summary and the page.
	ScopeRead = "read"
	// ScopeCurate also edits entries (PATCH) and writes the human summary (PUT).
	ScopeCurate = "curate"
	// ScopeAdmin also passes the admin API (bindings, workspaces, manual refresh),
	// which accepts the tokens the caller gives it (workspaces.HandlerOptions).
	ScopeAdmin = "admin"
)

// scopeLevel orders the scopes; -1 for an unknown one.
func scopeLevel(s string) int {
	switch s {
	case "", ScopeRead:
		return 0
	case ScopeCurate:
		return 1
	case ScopeAdmin:
		return 2
	}
	return -1
}

// Token is one API bearer token as configured (http.apiTokens): the token itself is
// never configured, only the hex SHA-256 of it.
type Token struct {
	// Name identifies the token in audit logs. 1-64 letters, digits, '.', '_' or '-'.
	Name string
	// SHA256 is the hex SHA-256 of the token (printf %s TOKEN | sha256sum).
	SHA256 string
	// Workspaces lists the workspace ids the token may read and curate, or holds
	// AllWorkspaces alone.
	Workspaces []string
	// Scope is ScopeRead (default when empty), ScopeCurate or ScopeAdmin.
	Scope string
}

var tokenNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

type grant struct {
	name  string
	level int // scopeLevel
	hash  [sha256.Size]byte
	all   bool
	scope map[ids.WorkspaceID]struct{}
}

func (g *grant) allows(ws ids.WorkspaceID) bool {
	if g.all {
		return true
	}
	_, ok := g.scope[ws]
	return ok
}

// authenticator checks bearer tokens against the configured hashes.
type authenticator struct {
	grants []grant
}

func newAuthenticator(tokens []Token) (*authenticator, error) {
	a := &authenticator{grants: make([]grant, 0, len(tokens))}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]string{}
	for i, t := range tokens {
		where := fmt.Sprintf("Tokens[%d]", i)
		if !tokenNameRE.MatchString(t.Name) {
			return nil, fmt.Errorf("%w: %s: name must be 1-64 letters, digits, '.', '_' or '-'", ErrInvalidOptions, where)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("%w: %s: name %q is used twice", ErrInvalidOptions, where, t.Name)
		}
		names[t.Name] = true
		g := grant{name: t.Name, scope: map[ids.WorkspaceID]struct{}{}, level: scopeLevel(t.Scope)}
		if g.level < 0 {
			return nil, fmt.Errorf("%w: %s (%s): scope %q, want %q (default), %q or %q", ErrInvalidOptions, where, t.Name, t.Scope, ScopeRead, ScopeCurate, ScopeAdmin)
		}
		raw, err := hex.DecodeString(strings.ToLower(t.SHA256))
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("%w: %s (%s): sha256 must be 64 hex digits, the SHA-256 of the token", ErrInvalidOptions, where, t.Name)
		}
		copy(g.hash[:], raw)
		if other, dup := hashes[g.hash]; dup {
			return nil, fmt.Errorf("%w: %s (%s): same sha256 as token %q", ErrInvalidOptions, where, t.Name, other)
		}
		hashes[g.hash] = t.Name
		if len(t.Workspaces) == 0 {
			return nil, fmt.Errorf("%w: %s (%s): workspaces is empty; list workspace ids or %q", ErrInvalidOptions, where, t.Name, AllWorkspaces)
		}
		for _, w := range t.Workspaces {
			if w == AllWorkspaces {
				if len(t.Workspaces) > 1 {
					return nil, fmt.Errorf("%w: %s (%s): %q must be alone in workspaces", ErrInvalidOptions, where, t.Name, AllWorkspaces)
				}
				g.all = true
				continue
			}
			ws, err := ids.ParseWorkspaceID(w)
			if err != nil {
				return nil, fmt.Errorf("%w: %s (%s): %w", ErrInvalidOptions, where, t.Name, err)
			}
			g.scope[ws] = struct{}{}
		}
		a.grants = append(a.grants, g)
	}
	return a, nil
}

// authFailure is why a request was refused; its code is the API error code and the
// metric label.
type authFailure struct {
	status  int
	code    string
	message string
}

var (
	failAPIDisabled = &authFailure{http.StatusForbidden, codeAPIDisabled,
		"the API has no tokens configured (http.apiTokens) and refuses every request"}
	failMissingToken = &authFailure{http.StatusUnauthorized, codeMissingToken,
		"an Authorization: Bearer <token> header is required"}
	failInvalidToken = &authFailure{http.StatusUnauthorized, codeInvalidToken,
		"the bearer token is not valid"}
	failForbidden = &authFailure{http.StatusForbidden, codeForbiddenWorkspace,
		"the token does not grant this workspace"}
	failReadOnly = &authFailure{http.StatusForbidden, codeForbiddenScope,
		"the token is read-only: this change needs a token of scope curate or admin"}
)

// bearer extracts the token of an "Authorization: Bearer <token>" header (the scheme
// is case-insensitive, RFC 9110 §11.1). ok is false when the header is absent; a
// present but malformed header gives ok with an empty token.
func bearer(r *http.Request) (token string, present bool) {
	h := r.Header.Values("Authorization")
	if len(h) == 0 {
		return "", false
	}
	if len(h) > 1 {
		return "", true
	}
	scheme, rest, found := strings.Cut(strings.TrimSpace(h[0]), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(rest), true
}

// authenticate finds the grant of the request's token. It hashes the presented token
// and compares it with every configured hash in constant time, without stopping at a
// match, so timing tells nothing about which tokens exist.
func (a *authenticator) authenticate(r *http.Request) (*grant, *authFailure) {
	if len(a.grants) == 0 {
		return nil, failAPIDisabled
	}
	tok, present := bearer(r)
	if !present {
		return nil, failMissingToken
	}
	if tok == "" {
		return nil, failInvalidToken
	}
	sum := sha256.Sum256([]byte(tok))
	match := -1
	for i := range a.grants {
		if subtle.ConstantTimeCompare(sum[:], a.grants[i].hash[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return nil, failInvalidToken
	}
	return &a.grants[match], nil
}
