package synth

import (
	"net"
	"regexp"
	"strings"
)

// Redaction labels: what replaces a removed span, "[REDACTED:<label>]". Keeping the
// label tells a model that something was there and what it was.
const (
	RedactedPrivateKey  = "private_key"
	RedactedCredentials = "credentials"
	RedactedJWT         = "jwt"
	RedactedToken       = "token"
	RedactedAWSKey      = "aws_key"
	RedactedSecret      = "secret"
	RedactedEmail       = "email"
	RedactedIP          = "ip"
	RedactedPhone       = "phone"
)

func redacted(label string) string { return "[REDACTED:" + label + "]" }

// redactor removes one kind of sensitive span. keep, when set, decides from the match
// whether it really is sensitive (RE2 has no look-around, so boundaries and entropy
// are checked in code); repl builds the replacement from the submatches.
type redactor struct {
	re   *regexp.Regexp
	keep func(s string, loc []int) bool
	repl func(s string, loc []int) string
}

func fixed(label string) func(string, []int) string {
	return func(string, []int) string { return redacted(label) }
}

// keepGroups returns a replacement that keeps submatches 1..n and redacts the rest.
func keepGroups(n int, label string) func(string, []int) string {
	return func(s string, loc []int) string {
		var b strings.Builder
		for g := 1; g <= n; g++ {
			if loc[2*g] >= 0 {
				b.WriteString(s[loc[2*g]:loc[2*g+1]])
			}
		}
		b.WriteString(redacted(label))
		return b.String()
	}
}

var redactors = []redactor{
	// PEM private keys (RSA, EC, OPENSSH, PKCS#8, PGP); a block cut off before its END
	// line is removed to the end of the text.
	{re: regexp.MustCompile(`(?s)-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)`),
		repl: fixed(RedactedPrivateKey)},
	// user:password@ in URLs (postgres://, redis://, https://, amqp://, ...).
	{re: regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]{1,15}://)[^\s/?#@:]+:[^\s/?#@]+@`),
		repl: func(s string, loc []int) string { return s[loc[2]:loc[3]] + redacted(RedactedCredentials) + "@" }},
	// JSON Web Tokens: base64url header and payload that both start with '{"'.
	{re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`),
		repl: fixed(RedactedJWT)},
	// Authorization schemes followed by a credential.
	{re: regexp.MustCompile(`(?i)\b(bearer|basic|token)(\s+)([A-Za-z0-9._~+/=-]{12,})`),
		keep: func(s string, loc []int) bool {
			v := s[loc[6]:loc[7]]
			return len(v) >= 24 || strings.ContainsAny(v, "0123456789")
		},
		repl: keepGroups(2, RedactedToken)},
	// Well-known token formats: GitHub, GitLab, Slack, OpenAI/Anthropic-style sk-,
	// Google API keys, Stripe, npm, Hugging Face, Lark/Feishu t-/u- access tokens.
	{re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{35}|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|npm_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{30,}|[tu]-[A-Za-z0-9]{30,})`),
		repl: fixed(RedactedToken)},
	// AWS access key ids.
	{re: regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|ABIA|ACCA)[A-Z0-9]{16}\b`),
		repl: fixed(RedactedAWSKey)},
	// key=value / key: value where the key names a secret (DB_PASSWORD=..., api_key: ...,
	// "client_secret": "...", ?token=...); the key stays, the value goes. An unquoted
	// value runs to whitespace, comma or semicolon: '&' belongs to it (passwords contain
	// it), so the rest of a query string goes too.
	{re: regexp.MustCompile(`(?i)\b([a-z0-9_.-]*?(?:password|passwd|pwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?|private[_-]?key|credentials?|session[_-]?id|cookie)"?)(\s*[:=]\s*)("[^"\n]*"|'[^'\n]*'|[^\s,;"'<>\[][^\s,;"'<>]*)`),
		repl: keepGroups(2, RedactedSecret)},
	// "the password is hunter2" (only for password words: "the token is expired" is prose).
	{re: regexp.MustCompile(`(?i)\b(password|passwd|passphrase)(\s+is\s+)("[^"\n]*"|'[^'\n]*'|[^\s,;\[][^\s,;]*)`),
		repl: keepGroups(2, RedactedSecret)},
	// Chinese: 密码是…, 密钥：…, 令牌为…
	{re: regexp.MustCompile(`(密码|口令|密钥|秘钥|令牌|私钥)(\s*(?:[:：=]|是|为)\s*)([^\s，。,;；、）)\[][^\s，。,;；、）)]*)`),
		repl: keepGroups(2, RedactedSecret)},
	// Email addresses.
	{re: regexp.MustCompile(`(?i)\b[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b`),
		repl: fixed(RedactedEmail)},
	// IPv4 addresses (each octet ≤ 255; not part of a longer dotted number such as a
	// version 1.2.3.4.5).
	{re: regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}\b`),
		keep: func(s string, loc []int) bool {
			return isolated(s, loc[0], loc[1], ".") && net.ParseIP(s[loc[0]:loc[1]]) != nil
		},
		repl: fixed(RedactedIP)},
	// IPv6 addresses (must parse; clock times like 12:30:45 and MAC addresses do not).
	{re: regexp.MustCompile(`(?i)(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}`),
		keep: func(s string, loc []int) bool {
			v := s[loc[0]:loc[1]]
			return isolated(s, loc[0], loc[1], ":.") && strings.Count(v, ":") >= 2 &&
				hexDigits(v) >= 2 && net.ParseIP(v) != nil
		},
		repl: fixed(RedactedIP)},
	// Chinese mobile numbers, optionally +86, optionally split 3-4-4.
	{re: regexp.MustCompile(`(?:\+?86[\s-]?)?1[3-9]\d[\s-]?\d{4}[\s-]?\d{4}`),
		keep: func(s string, loc []int) bool { return isolated(s, loc[0], loc[1], "+") },
		repl: fixed(RedactedPhone)},
	// International numbers in E.164-like notation: +44 20 7946 0958, +1 (415) 555-0100.
	{re: regexp.MustCompile(`\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{1,4}(?:[\s.-]?\d{2,4}){1,4}`),
		keep: func(s string, loc []int) bool {
			n := countDigits(s[loc[0]:loc[1]])
			return isolated(s, loc[0], loc[1], "") && n >= 8 && n <= 15
		},
		repl: fixed(RedactedPhone)},
	// North American and Chinese landline formats: (415) 555-0100, 415-555-0100,
	// 415.555.0100, 010-12345678. Space-separated digit groups are left alone: they are
	// far more often counts than phone numbers.
	{re: regexp.MustCompile(`(?:\(\d{3}\)\s?|\b\d{3}[.-])\d{3}[.-]\d{4}\b|\b0\d{2,3}-\d{7,8}\b`),
		keep: func(s string, loc []int) bool { return isolated(s, loc[0], loc[1], ".-") },
		repl: fixed(RedactedPhone)},
	// Long hex strings (32+ digits): keys, HMACs, session ids. Full 40-digit commit
	// hashes are removed too; short hashes (7-12 digits) survive.
	{re: regexp.MustCompile(`\b[0-9a-fA-F]{32,}\b`),
		repl: fixed(RedactedSecret)},
	// Long random-looking base64/base64url strings: mixed case and digits, few words.
	{re: regexp.MustCompile(`[A-Za-z0-9+/_-]{32,}={0,2}`),
		keep: func(s string, loc []int) bool { return looksRandom(s[loc[0]:loc[1]]) },
		repl: fixed(RedactedSecret)},
}

// Redact removes secrets and contact details from text before it is sent to a model:
//
//   - secrets: PEM private keys, user:password in URLs, JWTs, bearer/basic/token
//     credentials, well-known token formats (GitHub, GitLab, Slack, sk-…, Google, Stripe,
//     npm, Hugging Face, Lark t-/u- access tokens), AWS access key ids, values of
//     key=value pairs whose key names a secret (password, token, api_key, secret, …,
//     and Chinese 密码/密钥/令牌), hex strings of 32+ digits and long random-looking
//     base64 strings;
//   - contact details: email addresses, phone numbers (Chinese mobile numbers with or
//     without +86, E.164 international numbers, North American and Chinese landline
//     formats), and IPv4/IPv6 addresses, which name internal hosts.
//
// Each span becomes "[REDACTED:<label>]" (see the Redacted* constants); for key=value
// pairs and URLs the key or scheme stays so the sentence still reads. Redact is
// idempotent and leaves ordinary incident language alone: times, dates, versions,
// percentages, short commit hashes, UUIDs, pod names, plain URLs.
//
// It is a pattern-based safety net, not a guarantee: a secret in no known format and
// without a revealing key (a short random password alone in a sentence) passes.
func Redact(text string) string {
	for _, r := range redactors {
		text = r.apply(text)
	}
	return text
}

func (r redactor) apply(s string) string {
	locs := r.re.FindAllStringSubmatchIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, loc := range locs {
		if r.keep != nil && !r.keep(s, loc) {
			continue
		}
		b.WriteString(s[last:loc[0]])
		b.WriteString(r.repl(s, loc))
		last = loc[1]
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// isolated reports whether s[i:j] is not glued to a letter or digit (or to one of
// extra) on either side.
func isolated(s string, i, j int, extra string) bool {
	glued := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' ||
			strings.IndexByte(extra, c) >= 0
	}
	return (i == 0 || !glued(s[i-1])) && (j == len(s) || !glued(s[j]))
}

func countDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			n++
		}
	}
	return n
}

func hexDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' {
			n++
		}
	}
	return n
}

// looksRandom reports whether a long token of base64 characters looks like a key
// rather than a path or an identifier made of words: it needs upper case, lower case
// and a digit, and at most a third of it may be runs of four or more lower-case
// letters (words).
func looksRandom(s string) bool {
	var upper, lower, digit bool
	wordy, run := 0, 0
	flush := func() {
		if run >= 4 {
			wordy += run
		}
		run = 0
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			lower = true
			run++
			continue
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= '0' && c <= '9':
			digit = true
		}
		flush()
	}
	flush()
	return upper && lower && digit && wordy*3 <= len(s)
}
