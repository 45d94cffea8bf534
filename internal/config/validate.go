package config

import (
	"fmt"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/larkline/larkline/internal/logging"
	"github.com/larkline/larkline/schemas/ids"
)

// Bounds used by Validate, exported for documentation and tests. Validate checks
// the file's own rules: the shape of each value (names, URLs, host:port, the
// choices of a string key), that a key the file sets explicitly is not zero where
// the stage would read zero as "take my default", the rules that span stages, and
// what a switch that is on requires. The range and relation rules of a stage's
// options are the stage's own: its Options.Check, which cmd/larkline runs on the
// options this file maps onto and reports under the key (docs/decisions.md D17).
const (
	// MaxIngestionLookback is the design's eligibility limit (§6).
	MaxIngestionLookback = 72 * time.Hour
)

const tl = "services.workspace.timeline.lark."

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	sha256RE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	topicRE   = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	// groupPrefixRE leaves room in the 249-character topic limit for
	// "-windows-<version>-table".
	groupPrefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
	versionRE     = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}$`)
	opsPaths      = []string{"/metrics", "/healthz", "/readyz"}
)

// Validate checks the configuration and returns every problem at once as an *Error
// (matching ErrInvalid), or nil. It performs no I/O: it does not read secret files or
// contact anything.
func (c *Config) Validate() error { return asError(c.validate()) }

type checker struct {
	c        *Config
	problems []Problem
}

func (ch *checker) bad(path string, value any, format string, args ...any) {
	ch.problems = append(ch.problems, Problem{
		Field:   path,
		Value:   display(value),
		Source:  ch.c.Origin(path),
		Message: fmt.Sprintf(format, args...),
	})
}

// display renders a typed value for a problem message; secrets never appear.
func display(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case Secret:
		return x.displayValue()
	case time.Duration:
		return strconv.Quote(formatDuration(x))
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.String {
		return strconv.Quote(rv.String())
	}
	return fmt.Sprint(v)
}

// formatDuration writes a duration the short way: 72h, 1h30m, 10m, 5ms.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func (ch *checker) positive(path string, d time.Duration) bool {
	if d <= 0 {
		ch.bad(path, d, "must be positive")
		return false
	}
	return true
}

func (ch *checker) notNegative(path string, d time.Duration) bool {
	if d < 0 {
		ch.bad(path, d, "must not be negative")
		return false
	}
	return true
}

func (ch *checker) atLeast(path string, d, lo time.Duration) bool {
	if d < lo {
		ch.bad(path, d, "must be at least %s", formatDuration(lo))
		return false
	}
	return true
}

func (ch *checker) minInt(path string, v, lo int64) {
	if v < lo {
		ch.bad(path, v, "must be at least %d", lo)
	}
}

func oneOf[T ~string](ch *checker, path string, v T, allowed ...T) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
		if a == "" {
			names[i] = `"" (none)`
		}
	}
	ch.bad(path, v, "must be one of %s", strings.Join(names, ", "))
	return false
}

// httpURL checks an absolute http(s) URL; pathAllowed permits a path.
func (ch *checker) httpURL(path, raw string, pathAllowed bool) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		ch.bad(path, raw, "must be an absolute http:// or https:// URL")
	case u.User != nil:
		ch.bad(path, raw, "must not carry credentials (user:password@): a URL is logged and printed, and larkline has no credentials for this endpoint")
	case u.RawQuery != "" || u.Fragment != "":
		ch.bad(path, raw, "must not have a query or fragment")
	case !pathAllowed && u.Path != "" && u.Path != "/":
		ch.bad(path, raw, "must be the scheme and host only, such as %s", LarkOpenBaseURL)
	}
}

// hostPort checks host:port; portZero allows port 0 (any free port).
func (ch *checker) hostPort(path, raw string, needHost, portZero bool) {
	host, port, err := net.SplitHostPort(raw)
	if err != nil {
		ch.bad(path, raw, "must be host:port")
		return
	}
	p, err := strconv.Atoi(port)
	lo := 1
	if portZero {
		lo = 0
	}
	switch {
	case needHost && host == "":
		ch.bad(path, raw, "must name a host, as in host:port")
	case err != nil || p < lo || p > 65535:
		ch.bad(path, raw, "must have a port between %d and 65535", lo)
	}
}

// need reports that a value required by a switch is missing.
type need struct {
	path    string
	value   any
	because []string
}

func (c *Config) validate() []Problem {
	ch := &checker{c: c}
	c.validateTimeline(ch)
	c.validateKafka(ch)
	c.validatePostgres(ch)
	c.validateLark(ch)
	c.validateHTTP(ch)
	c.validateSynthesis(ch)
	if c.Windows.StateDir == "" {
		ch.bad("windows.stateDir", c.Windows.StateDir, "must name a directory for the processor's local state")
	}
	if c.Windows.OversizedVersions < 0 {
		ch.bad("windows.oversizedVersions", c.Windows.OversizedVersions, "must be 0 (never flag) or a positive number of evidence versions")
	}
	if _, err := logging.ParseLevel(c.Log.Level); err != nil {
		ch.bad("log.level", c.Log.Level, "must be one of debug, info, warn, error")
	}
	if err := logging.ValidFormat(c.Log.Format); err != nil {
		ch.bad("log.format", c.Log.Format, "must be json or text")
	}
	c.validateRequired(ch)
	return ch.problems
}

func (c *Config) validateTimeline(ch *checker) {
	l := c.Services.Workspace.Timeline.Lark
	if ch.positive(tl+"ingestionLookback", l.IngestionLookback) && l.IngestionLookback > MaxIngestionLookback {
		ch.bad(tl+"ingestionLookback", l.IngestionLookback, "must be at most 72h: the design makes a workspace eligible only within 72 hours of its creation")
	}
	// The zero rule: these stages read zero as "take my default", which a file
	// that sets the key explicitly never means. Their ranges and relations
	// (synthesisWindow divides an hour, grace is shorter than it, staleTimeout is
	// at least 3s, ...) are the stages' own Options.Check.
	ch.positive(tl+"synthesisScanInterval", l.SynthesisScanInterval)
	ch.positive(tl+"synthesisStaleTimeout", l.SynthesisStaleTimeout)
	ch.minInt(tl+"synthesisWindowMaxAttempts", int64(l.SynthesisWindowMaxAttempts), 1)
	ch.positive(tl+"reconcileInterval", l.ReconcileInterval)
	ch.atLeast(tl+"evidenceRefreshInterval", l.EvidenceRefreshInterval, time.Second)
	ch.positive(tl+"evidenceRefreshLookback", l.EvidenceRefreshLookback)
	ch.minInt(tl+"evidenceBatchLimit", int64(l.EvidenceBatchLimit), 1)
	ch.minInt(tl+"maxConcurrentSynthesis", int64(l.MaxConcurrentSynthesis), 1)

	if !nameRE.MatchString(l.Environment) {
		ch.bad(tl+"environment", l.Environment, "must be 1-63 lower-case letters, digits, '-' or '_', starting with a letter or digit")
	}
	seen := map[string]bool{}
	for i, t := range l.WorkspaceTypes {
		p := fmt.Sprintf("%sworkspaceTypes[%d]", tl, i)
		switch {
		case !nameRE.MatchString(t):
			ch.bad(p, t, "must be 1-63 lower-case letters, digits, '-' or '_', starting with a letter or digit")
		case seen[t]:
			ch.bad(p, t, "is listed twice")
		}
		seen[t] = true
	}
	if l.Enabled && len(l.WorkspaceTypes) == 0 {
		ch.bad(tl+"workspaceTypes", l.WorkspaceTypes, "must list at least one workspace type while %senabled is true", tl)
	}
	ch.minInt(tl+"maxEstimatedTokensPerChunk", int64(l.MaxEstimatedTokensPerChunk), 1)
	ch.minInt(tl+"maxMessageTextBytes", int64(l.MaxMessageTextBytes), 1)

	r := l.Retention
	const rp = tl + "retention."
	// A rule across stages (retention and ingestion), so the file's own.
	if r.EvidenceRetention > 0 && r.EvidenceRetention < l.IngestionLookback {
		ch.bad(rp+"evidenceRetention", r.EvidenceRetention,
			"must be at least ingestionLookback (%s): evidence of an eligible workspace must not be removed while it is still ingested",
			formatDuration(l.IngestionLookback))
	}
	ch.positive(rp+"interval", r.Interval)
}

// validateKafka checks the kafka.* keys the Kafka clients do not own: topic and
// group names, partitions and replication, the registry URL, and the zero rule. The
// brokers, client id, producer, consumer, TLS, SASL and protocol version rules are
// internal/kafka's Options.Check and GokaOptions.Check (D17).
func (c *Config) validateKafka(ch *checker) {
	k := c.Kafka
	if k.ClientID == "" {
		ch.bad("kafka.clientID", k.ClientID, "must be set: it names larkline's clients in the broker's logs, quotas and ACLs")
	}
	if !groupPrefixRE.MatchString(k.GroupPrefix) {
		ch.bad("kafka.groupPrefix", k.GroupPrefix, "must be 1-100 letters, digits, '.', '_' or '-' (it starts group and state topic names)")
	}
	topics := []struct{ key, name string }{
		{"evidence", k.Topics.Evidence}, {"windowsClosed", k.Topics.WindowsClosed},
		{"checkpoints", k.Topics.Checkpoints}, {"workspaces", k.Topics.Workspaces}, {"deadLetter", k.Topics.DeadLetter},
	}
	firstUse := map[string]string{}
	for _, t := range topics {
		p := "kafka.topics." + t.key
		switch {
		case !topicRE.MatchString(t.name) || t.name == "." || t.name == "..":
			ch.bad(p, t.name, "must be a Kafka topic name: 1-249 of letters, digits, '.', '_' or '-'")
		case firstUse[t.name] != "":
			ch.bad(p, t.name, "must differ from %s", firstUse[t.name])
		default:
			firstUse[t.name] = p
		}
	}
	ch.minInt("kafka.partitions", int64(k.Partitions), 1)
	ch.minInt("kafka.replicationFactor", int64(k.ReplicationFactor), 1)
	// 0 is "send at once"
	ch.notNegative("kafka.producer.linger", k.Producer.Linger)
	ch.minInt("kafka.producer.maxBufferedRecords", int64(k.Producer.MaxBufferedRecords), 1)
	ch.positive("kafka.consumer.sessionTimeout", k.Consumer.SessionTimeout)
	ch.positive("kafka.consumer.rebalanceTimeout", k.Consumer.RebalanceTimeout)
	ch.positive("kafka.consumer.fetchMaxWait", k.Consumer.FetchMaxWait)
	if u := c.Schemas.Registry.URL; strings.Contains(u, "@") {
		if pu, err := url.Parse(u); err == nil && pu.User != nil {
			ch.bad("schemas.registry.url", pu.Redacted(), "must not carry credentials (user:password@): set schemas.registry.username and passwordFile, or bearerTokenFile")
		}
	} else if u != "" {
		ch.httpURL("schemas.registry.url", u, true)
	}
}

func (c *Config) validatePostgres(ch *checker) {
	ch.minInt("postgres.maxConns", int64(c.Postgres.MaxConns), 1)
	ch.positive("postgres.connectTimeout", c.Postgres.ConnectTimeout)
}

func (c *Config) validateLark(ch *checker) {
	l := c.Lark
	oneOf(ch, "lark.mode", l.Mode, LarkModeWebhook, LarkModeLongConn)
	if l.AppID != "" && (!strings.HasPrefix(l.AppID, "cli_") || !tokenName.MatchString(l.AppID)) {
		ch.bad("lark.appID", l.AppID, "must be a Lark app id, which starts with cli_")
	}
	if l.BotOpenID != "" && (!strings.HasPrefix(l.BotOpenID, "ou_") || !tokenName.MatchString(l.BotOpenID)) {
		ch.bad("lark.botOpenID", l.BotOpenID, "must be an open_id, which starts with ou_")
	}
	if l.OpenBaseURL == "" {
		ch.bad("lark.openBaseURL", l.OpenBaseURL, "must be set, such as %s or %s", LarkOpenBaseURL, FeishuOpenBaseURL)
	} else {
		ch.httpURL("lark.openBaseURL", l.OpenBaseURL, false)
	}
	switch p := l.WebhookPath; {
	case !strings.HasPrefix(p, "/") || strings.ContainsAny(p, " \t?#{}"):
		ch.bad("lark.webhookPath", p, "must be a URL path starting with /, without spaces, query, fragment or wildcards")
	default:
		for _, ops := range opsPaths {
			if p == ops {
				ch.bad("lark.webhookPath", p, "must not be one of the ops endpoints (%s)", strings.Join(opsPaths, ", "))
			}
		}
	}
	ch.positive("lark.maxTimestampSkew", l.MaxTimestampSkew)
	// The zero rule only: Lark's limits (50 requests per second, page_size 50)
	// and the other bounds are reconcile's Options.Check.
	a := l.API
	if a.RequestsPerSecond <= 0 {
		ch.bad("lark.api.requestsPerSecond", a.RequestsPerSecond, "must be above 0")
	}
	ch.minInt("lark.api.burst", int64(a.Burst), 1)
	ch.minInt("lark.api.maxConcurrentChats", int64(a.MaxConcurrentChats), 1)
	ch.minInt("lark.api.maxPagesPerRun", int64(a.MaxPagesPerRun), 1)
	ch.minInt("lark.api.pageSize", int64(a.PageSize), 1)
	ch.minInt("lark.api.maxRetries", int64(a.MaxRetries), 0)
	ch.positive("lark.api.maxBackoff", a.MaxBackoff)
}

func (c *Config) validateHTTP(ch *checker) {
	h := c.HTTP
	ch.hostPort("http.listen", h.Listen, false, true)
	ch.hostPort("http.apiListen", h.APIListen, false, true)
	ch.hostPort("http.webhookListen", h.WebhookListen, false, true)
	names := map[string]int{}
	hashes := map[string]int{}
	for i, t := range h.APITokens {
		p := fmt.Sprintf("http.apiTokens[%d]", i)
		if !tokenName.MatchString(t.Name) {
			ch.bad(p+".name", t.Name, "must be 1-64 letters, digits, '.', '_' or '-'")
		} else if j, dup := names[t.Name]; dup {
			ch.bad(p+".name", t.Name, "is also the name of http.apiTokens[%d]", j)
		} else {
			names[t.Name] = i
		}
		if !sha256RE.MatchString(t.SHA256) {
			ch.bad(p+".sha256", t.SHA256, "must be 64 lower-case hex digits: the SHA-256 of the token (printf %%s TOKEN | sha256sum)")
		} else if j, dup := hashes[t.SHA256]; dup {
			ch.bad(p+".sha256", t.SHA256, "is also the hash of http.apiTokens[%d]", j)
		} else {
			hashes[t.SHA256] = i
		}
		if len(t.Workspaces) == 0 {
			ch.bad(p+".workspaces", t.Workspaces, `must list workspace ids, or ["*"] for all`)
		}
		switch t.Scope {
		case "", "read", "curate", "admin":
		default:
			ch.bad(p+".scope", t.Scope, "must be read (the default), curate or admin")
		}
		seen := map[string]bool{}
		for j, w := range t.Workspaces {
			wp := fmt.Sprintf("%s.workspaces[%d]", p, j)
			switch {
			case w == AllWorkspaces && len(t.Workspaces) > 1:
				ch.bad(wp, w, `must be alone: "*" already grants every workspace`)
			case w == AllWorkspaces:
			case seen[w]:
				ch.bad(wp, w, "is listed twice")
			default:
				if _, err := ids.ParseWorkspaceID(w); err != nil {
					ch.bad(wp, w, "must be a workspace id (letters, digits, _ - . :; at most %d bytes)", ids.MaxIDLen)
				}
			}
			seen[w] = true
		}
	}
	if k := h.CursorKey.Value(); k != "" && len(k) < MinCursorKeyBytes {
		ch.bad("http.cursorKey", h.CursorKey, "must hold at least %d bytes (e.g. head -c 32 /dev/urandom | base64), or be empty to generate one at start", MinCursorKeyBytes)
	}
	if h.AdminTokenSHA256 != "" {
		if !sha256RE.MatchString(h.AdminTokenSHA256) {
			ch.bad("http.adminTokenSHA256", h.AdminTokenSHA256, "must be empty or 64 lower-case hex digits: the SHA-256 of the admin token")
		} else if j, dup := hashes[h.AdminTokenSHA256]; dup {
			ch.bad("http.adminTokenSHA256", h.AdminTokenSHA256, "must differ from the hash of http.apiTokens[%d]: the admin token needs its own secret", j)
		}
	}
}

func (c *Config) validateSynthesis(ch *checker) {
	s := c.Synthesis
	oneOf(ch, "synthesis.synthesizer", s.Synthesizer, SynthesizerRules, SynthesizerOpenAI)
	// The zero rule only; the client's rules are openai's Options.Check, run when
	// the synthesizer is openai.
	o := s.OpenAI
	ch.positive("synthesis.openai.timeout", o.Timeout)
	ch.minInt("synthesis.openai.maxRetries", int64(o.MaxRetries), 0)
	ch.minInt("synthesis.openai.maxOutputTokens", int64(o.MaxOutputTokens), 1)
	if !versionRE.MatchString(s.PromptVersion) {
		ch.bad("synthesis.promptVersion", s.PromptVersion, "must be 1-32 letters, digits, '.', '_' or '-', such as v1")
	}
	ch.positive("synthesis.evidenceWait", s.EvidenceWait)
}

// validateRequired reports values that a switch that is on needs, once per value.
func (c *Config) validateRequired(ch *checker) {
	l := c.Services.Workspace.Timeline.Lark
	var needs []*need
	require := func(path string, value any, set bool, because string) {
		if set {
			return
		}
		for _, n := range needs {
			if n.path == path {
				n.because = append(n.because, because)
				return
			}
		}
		needs = append(needs, &need{path: path, value: value, because: []string{because}})
	}
	if l.EventIngestionActive() {
		switch c.Lark.Mode {
		case LarkModeWebhook:
			because := tl + "eventIngestionEnabled is true with lark.mode webhook (callbacks are verified and decrypted)"
			require("lark.verificationToken", c.Lark.VerificationToken, c.Lark.VerificationToken.IsSet(), because)
			require("lark.encryptKey", c.Lark.EncryptKey, c.Lark.EncryptKey.IsSet(), because)
		case LarkModeLongConn:
			because := tl + "eventIngestionEnabled is true with lark.mode longconn"
			require("lark.appID", c.Lark.AppID, c.Lark.AppID != "", because)
			require("lark.appSecret", c.Lark.AppSecret, c.Lark.AppSecret.IsSet(), because)
		}
	}
	if l.ReconciliationActive() {
		because := tl + "reconciliationEnabled is true"
		require("lark.appID", c.Lark.AppID, c.Lark.AppID != "", because)
		require("lark.appSecret", c.Lark.AppSecret, c.Lark.AppSecret.IsSet(), because)
	}
	if c.Synthesis.Synthesizer == SynthesizerOpenAI {
		because := "synthesis.synthesizer is openai"
		require("synthesis.openai.baseURL", c.Synthesis.OpenAI.BaseURL, c.Synthesis.OpenAI.BaseURL != "", because)
		require("synthesis.openai.model", c.Synthesis.OpenAI.Model, c.Synthesis.OpenAI.Model != "", because)
		require("synthesis.openai.apiKey", c.Synthesis.OpenAI.APIKey, c.Synthesis.OpenAI.APIKey.IsSet(), because)
	}
	if s := c.Kafka.SASL; s.Mechanism == SASLPlain || s.Mechanism == SASLScramSHA256 || s.Mechanism == SASLScramSHA512 {
		because := "kafka.sasl.mechanism is " + string(s.Mechanism)
		require("kafka.sasl.username", s.Username, s.Username != "", because)
		require("kafka.sasl.password", s.Password, s.Password.IsSet(), because)
	}
	for _, n := range needs {
		ch.bad(n.path, n.value, "must be set%s because %s", howToSet(n.path), strings.Join(n.because, ", and "))
	}
}

// howToSet names the ways to set a key, mentioning the *File key for secrets.
func howToSet(path string) string {
	idx, err := loadSchema()
	if err != nil {
		return ""
	}
	k := idx.byPath[path]
	if k == nil {
		return ""
	}
	if k.kind == kindSecret {
		return fmt.Sprintf(" (in the file, with %s%s pointing at a file, or as %s)", path, fileSuffix, k.env)
	}
	return fmt.Sprintf(" (in the file or as %s)", k.env)
}

// Require returns an *Error (matching ErrInvalid) naming every key among paths whose
// value is empty: an empty string, secret or list. Roles call it for what they alone
// need, such as Require("postgres.dsn") in a role that writes Postgres. An unknown
// path is reported as a problem too.
func (c *Config) Require(paths ...string) error {
	idx, err := loadSchema()
	if err != nil {
		return fmt.Errorf("checking required keys: %w", err)
	}
	ch := &checker{c: c}
	root := reflect.ValueOf(c).Elem()
	for _, p := range paths {
		k := idx.byPath[p]
		if k == nil || k.kind == kindSection {
			ch.bad(p, nil, "is not a configuration key")
			continue
		}
		v := idx.field(root, k)
		if v.IsZero() || (v.Kind() == reflect.Slice && v.Len() == 0) {
			ch.bad(p, nil, "must be set%s", howToSet(p))
		}
	}
	return asError(ch.problems)
}
