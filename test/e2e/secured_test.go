package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/provision"
)

// The secured broker (testenv.SecuredKafka): SASL_SSL with SCRAM-SHA-512, mTLS, the
// standard authorizer. Every test here grants its principal exactly the ACLs of
// docs/operations.md ("Secured cluster"), read from that file, or those minus one.

// docACLs parses the kafka-acls.sh commands of the secured cluster section of
// docs/operations.md, with PRINCIPAL, TOPIC_PREFIX and GROUP_PREFIX substituted.
func docACLs(t testing.TB, principal, topicPrefix, groupPrefix string) []testenv.ACL {
	t.Helper()
	return docACLsIn(t, "Secured cluster", principal, topicPrefix, groupPrefix)
}

// docACLsIn is docACLs of the level-2 section titled title.
func docACLsIn(t testing.TB, title, principal, topicPrefix, groupPrefix string) []testenv.ACL {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("docs/operations.md has no \"## %s\" section", title)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	vars := map[string]string{"$PRINCIPAL": principal, "$TOPIC_PREFIX": topicPrefix, "$GROUP_PREFIX": groupPrefix}
	var acls []testenv.ACL
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "kafka-acls.sh ") {
			continue
		}
		args := strings.Fields(line)
		var a testenv.ACL
		add := false
		for i := 1; i < len(args); i++ {
			next := func() string {
				if i+1 >= len(args) {
					t.Fatalf("docs/operations.md: %q: %s without a value", line, args[i])
				}
				i++
				v := strings.Trim(args[i], `"'`)
				for k, sub := range vars {
					v = strings.ReplaceAll(v, k, sub)
				}
				if strings.Contains(v, "$") {
					t.Fatalf("docs/operations.md: %q: unknown variable in %q", line, v)
				}
				return v
			}
			switch args[i] {
			case "--add":
				add = true
			case "--allow-principal":
				a.Principal = next()
			case "--operation":
				a.Operation = next()
			case "--topic":
				a.Resource, a.Name = "topic", next()
			case "--group":
				a.Resource, a.Name = "group", next()
			case "--cluster":
				a.Resource, a.Name = "cluster", "kafka-cluster"
			case "--transactional-id":
				a.Resource, a.Name = "transactional-id", next()
			case "--resource-pattern-type":
				switch v := next(); v {
				case "prefixed":
					a.Prefixed = true
				case "literal":
				default:
					t.Fatalf("docs/operations.md: %q: pattern type %q", line, v)
				}
			case "--bootstrap-server", "--command-config":
				i++ // the administrator's connection: not part of the rule
			default:
				t.Fatalf("docs/operations.md: %q: option %s is not understood by this test", line, args[i])
			}
		}
		if !add || a.Principal == "" || a.Operation == "" || a.Resource == "" {
			t.Fatalf("docs/operations.md: %q: not an --add of an allow rule with an operation and a resource", line)
		}
		acls = append(acls, a)
	}
	if len(acls) == 0 {
		t.Fatal("docs/operations.md: no kafka-acls.sh command in the secured cluster section")
	}
	return acls
}

// securedUser is a principal of the secured broker and how larkline and the test
// reach it.
type securedUser struct {
	principal string
	brokers   []string
	env       []string // larkline's configuration overrides
}

func newSecuredUser(t testing.TB, s *testenv.Secured, mode string) securedUser {
	t.Helper()
	switch mode {
	case "sasl_ssl":
		user, pass := s.NewSCRAMUser(t, "larkline")
		return securedUser{principal: "User:" + user, brokers: s.SASLBrokers, env: []string{
			"LARKLINE_KAFKA__TLS__ENABLED=true", "LARKLINE_KAFKA__TLS__CAFILE=" + s.CAFile,
			"LARKLINE_KAFKA__SASL__MECHANISM=scram-sha-512", "LARKLINE_KAFKA__SASL__USERNAME=" + user,
			"LARKLINE_KAFKA__SASL__PASSWORD=" + pass,
		}}
	case "oauthbearer":
		// Kafka's unsecured JWT validator: the token's sub is the principal. The
		// listener's certificate names only provision.OAuthServerName.
		user := "larkline-oauth-" + randHex(4)
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte(testenv.UnsecuredJWT(user, 2*time.Hour)), 0o600); err != nil {
			t.Fatal(err)
		}
		return securedUser{principal: "User:" + user, brokers: s.OAuthBrokers, env: []string{
			"LARKLINE_KAFKA__TLS__ENABLED=true", "LARKLINE_KAFKA__TLS__CAFILE=" + s.CAFile,
			"LARKLINE_KAFKA__TLS__SERVERNAME=" + provision.OAuthServerName,
			"LARKLINE_KAFKA__SASL__MECHANISM=oauthbearer", "LARKLINE_KAFKA__SASL__OAUTH__TOKENFILE=" + tokenFile,
		}}
	case "mtls":
		user, cert, key := s.NewCertUser(t, "larkline")
		return securedUser{principal: "User:" + user, brokers: s.MTLSBrokers, env: []string{
			"LARKLINE_KAFKA__TLS__ENABLED=true", "LARKLINE_KAFKA__TLS__CAFILE=" + s.CAFile,
			"LARKLINE_KAFKA__TLS__CERTFILE=" + cert, "LARKLINE_KAFKA__TLS__KEYFILE=" + key,
		}}
	}
	t.Fatalf("secured mode %q", mode)
	return securedUser{}
}

func securedAdminOpts(t testing.TB, s *testenv.Secured) []kgo.Opt {
	t.Helper()
	tc, err := s.ClientTLS(s.AdminCertFile, s.AdminKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return []kgo.Opt{kgo.SeedBrokers(s.MTLSBrokers...), kgo.DialTLSConfig(tc)}
}

// TestSecuredPipeline runs the whole deployment (every role: franz-go stages and the
// Goka/sarama window processor) on the secured broker as a principal holding exactly
// the documented ACLs, over SASL_SSL (SCRAM-SHA-512), over mTLS, and over SASL_SSL
// with OAUTHBEARER (a token file; kafka.tls.serverName, since that listener's
// certificate does not name the bootstrap address): topics ensure,
// workspaces and bindings, the scenario through the webhook to synthesized entries
// with every invariant, then `lag` and a `replay` of a new processor version.
func TestSecuredPipeline(t *testing.T) {
	t.Parallel()
	s := testenv.SecuredKafka(t)
	for _, mode := range []string{"sasl_ssl", "mtls", "oauthbearer"} {
		t.Run(mode, func(t *testing.T) {
			u := newSecuredUser(t, s, mode)
			prefix := "e2e-" + randHex(4)
			s.Grant(t, docACLs(t, u.principal, prefix+".", prefix)...)
			p := newPipeline(t, pipelineOptions{Prefix: prefix, Brokers: u.brokers, Env: u.env,
				KafkaClient: securedAdminOpts(t, s), Timeout: 8 * time.Minute})
			ctx := p.ctx
			p.deliver(ctx)
			g := p.finish(4 * time.Minute)
			if g.expected == 0 {
				t.Fatal("no evidence expected: the scenario proved nothing")
			}
			if r := p.restarts(); len(r) > 0 {
				t.Errorf("processes restarted: %v", r)
			}

			lag := p.cli(ctx, "lag")
			for _, grp := range []string{p.group("sink"), p.group("synthesis"), p.group("workspaces"), p.group("windows-v1"), p.group("windows-v1-publisher")} {
				if !strings.Contains(lag, grp+" ") {
					t.Errorf("larkline lag names no line of group %s:\n%s", grp, lag)
				}
			}
			if strings.Contains(lag, "error:") {
				t.Errorf("larkline lag could not read a group:\n%s", lag)
			}

			p.versionCaughtUp(ctx, t, "v2")
		})
	}
}

// versionCaughtUp runs `larkline versions start <version>`, which the running windows
// process picks up, until it says the version caught up with the evidence topic.
func (p *pipeline) versionCaughtUp(ctx context.Context, t *testing.T, version string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, larklineBin, "versions", "start", version, "--progress", "1s")
	cmd.Env = append(larklineEnv(), p.env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	caught := false
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "caught up: ") {
			caught = true
			break
		}
	}
	_ = cmd.Process.Signal(os.Interrupt)
	go func() { _, _ = bufio.NewReader(out).WriteTo(discard{}) }()
	werr := cmd.Wait()
	if !caught {
		t.Fatalf("versions start %s never caught up (exit %v):\n%s\n--- stderr tail ---\n%s", version, werr, strings.Join(lines, "\n"), tailLines(stderr.String(), 30))
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// TestSecuredMissingACL grants a principal every documented ACL but one, in turn, and
// checks that larkline refuses to start with an error naming exactly that permission
// (operation and resource), promptly: `topics ensure` for what it needs, else `run`
// with every Kafka role.
func TestSecuredMissingACL(t *testing.T) {
	t.Parallel()
	s := testenv.SecuredKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	prefix := "e2e-" + randHex(4)
	cfgPath := securedConfig(t, prefix, s.SASLBrokers)
	all := docACLs(t, "User:placeholder", prefix+".", prefix)
	for i, left := range all {
		t.Run(fmt.Sprintf("%d-%s-%s-%s", i, left.Operation, left.Resource, left.Name), func(t *testing.T) {
			u := newSecuredUser(t, s, "sasl_ssl")
			var grant []testenv.ACL
			for j, a := range docACLs(t, u.principal, prefix+".", prefix) {
				if j != i {
					grant = append(grant, a)
				}
			}
			s.Grant(t, grant...)
			// the resource named is one under the ACL's prefix: `missing Read on group "<prefix>-sink"`
			want := fmt.Sprintf(`missing %s on %s "%s`, left.Operation, left.Resource, left.Name)
			env := append([]string{"LARKLINE_CONFIG=" + cfgPath}, u.env...)
			for _, args := range [][]string{
				{"topics", "ensure"},
				{"run", "--roles", "ingest,reconcile,sink,workspaces,windows,synthesis,lag,retention"},
			} {
				start := time.Now()
				stderr, err := runBounded(ctx, env, 90*time.Second, args...)
				took := time.Since(start)
				if err == nil {
					if args[0] == "run" {
						t.Fatalf("larkline %s ran without %s", strings.Join(args, " "), left)
					}
					continue // topics ensure does not need it
				}
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("larkline %s without %s did not exit within 90s (a hang or a retry loop):\n%s", strings.Join(args, " "), left, tailLines(stderr, 20))
				}
				if !strings.Contains(stderr, want) {
					t.Fatalf("larkline %s without %s: want %q in its error, got:\n%s", strings.Join(args, " "), left, want, tailLines(stderr, 20))
				}
				t.Logf("larkline %s exited after %s: %s", strings.Join(args, " "), took.Round(time.Millisecond), firstLine(stderr, "missing "))
				return
			}
		})
	}
}

func firstLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// runBounded runs a larkline command with env, killed after limit; the error is
// context.DeadlineExceeded when it had to be killed.
func runBounded(ctx context.Context, env []string, limit time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, larklineBin, args...)
	cmd.Env = append(larklineEnv(), env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.String(), context.DeadlineExceeded
	}
	return out.String(), err
}

// securedConfig writes a full configuration (the pipeline's) for a deployment named
// prefix, with a local Lark and a fresh database, and returns its path.
func securedConfig(t *testing.T, prefix string, brokers []string) string {
	t.Helper()
	sc, err := larktest.Incident()
	if err != nil {
		t.Fatal(err)
	}
	lk, err := larktest.New(larktest.Options{AppID: "cli_" + prefix[4:], AppSecret: "s", VerificationToken: "v", EncryptKey: "e", Scenario: sc})
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lk.Close() })
	p := &pipeline{t: t, prefix: prefix, version: "v1", window: testWindow, sc: sc, dir: t.TempDir()}
	cfg := p.config(pipelineOptions{Brokers: brokers, ProcessDSN: testenv.PostgresDSN(t)}, lk, "s", "v", "e")
	cfg["windows"].(map[string]any)["stateDir"] = filepath.Join(p.dir, "state")
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(p.dir, "larkline.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
