package main

import (
	"fmt"
	"reflect"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/ingest"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/connectors/lark/reconcile"
	pgsink "github.com/larkline/larkline/connectors/postgres"
	"github.com/larkline/larkline/connectors/workspaces"
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/httpapi"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lagexport"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/retention"
	"github.com/larkline/larkline/processors/synthesis"
	"github.com/larkline/larkline/processors/windows"
)

// The mapping of configuration keys onto each stage's value options is one file
// per stage (<stage>_options.go). Each field is set by one statement that also
// names its key (set, add, nest), so the keys a stage's problems are reported
// under (config.FieldKeys) are recorded as the options are built, never written
// again (docs/decisions.md D17, D38). A role takes the stage's options and adds
// its dependencies; stageChecks run the stage's own Options.Check at load.

const tl = "services.workspace.timeline.lark."

// mapped is one stage's options as the configuration sets them, with the key of
// every field it set.
type mapped[O any] struct {
	opts O
	keys config.FieldKeys
}

// newMapped starts the mapping of options O: m records the keys, o is the options.
func newMapped[O any]() (m *mapped[O], o *O) {
	m = &mapped[O]{keys: config.FieldKeys{}}
	return m, &m.opts
}

// set sets the field at p, a field of m.opts, to v, the value of key.
func set[O, T any](m *mapped[O], p *T, key string, v T) {
	*p = v
	m.keys[m.field(p)] = key
}

// add appends v, the value of key, to the list field at p: a problem with that
// value is reported under key.
func add[O any](m *mapped[O], p *[]string, key, v string) {
	*p = append(*p, v)
	m.keys[m.field(p)+"="+v] = key
}

// nest sets the options at p, a field of m.opts, to sub's, with sub's keys under
// the field's path.
func nest[O, T any](m *mapped[O], p *T, sub mapped[T]) {
	*p = sub.opts
	prefix := m.field(p)
	for f, key := range sub.keys {
		if prefix != "" {
			f = prefix + "." + f
		}
		m.keys[f] = key
	}
}

// field is the Go path of the field at p within m.opts, as a stage's Check names
// it ("Producer.Linger"; an embedded struct's fields by their promoted names). A
// pointer that is no field of m.opts is a mistake of this file: it panics, and
// every mapping runs in the tests.
func (m *mapped[O]) field(p any) string {
	path, ok := fieldPath(reflect.ValueOf(&m.opts).Elem(), reflect.ValueOf(p))
	if !ok {
		panic(fmt.Sprintf("stageopts: %T is not a field of %T", p, m.opts))
	}
	return path
}

func fieldPath(v, p reflect.Value) (string, bool) {
	for i := range v.NumField() {
		sf, f := v.Type().Field(i), v.Field(i)
		if !sf.IsExported() {
			continue
		}
		name := sf.Name
		if sf.Anonymous {
			name = ""
		}
		if f.Addr().UnsafePointer() == p.UnsafePointer() && f.Type() == p.Type().Elem() {
			return name, true
		}
		if f.Kind() != reflect.Struct {
			continue
		}
		if sub, ok := fieldPath(f, p); ok {
			if name == "" {
				return sub, true
			}
			return name + "." + sub, true
		}
	}
	return "", false
}

// validateConfig checks the file's own rules and every stage's (stageChecks),
// all problems at once.
func validateConfig(cfg *config.Config) error { return cfg.ValidateWith(stageChecks...) }

// A stage is one stage's options as the configuration maps them, and its check.
type stage struct {
	name string
	// used says whether the configuration uses the stage (nil: always); an unused
	// stage's rules do not apply. A used stage is checked whether or not this
	// process runs it: a file is right or wrong as a whole, not per role.
	used  func(*config.Config) bool
	build func(*config.Config) (opts any, keys config.FieldKeys, problems error)
}

// stageOf is the stage of a mapping, checked by its options' Check.
func stageOf[O interface{ Check() error }](name string, used func(*config.Config) bool, mapping func(*config.Config) mapped[O]) stage {
	return stage{name, used, func(c *config.Config) (any, config.FieldKeys, error) {
		m := mapping(c)
		return m.opts, m.keys, registryProblems(m.opts.Check())
	}}
}

// stages are the stages whose options the configuration maps and checks.
var stages = []stage{
	stageOf("kafka", nil, func(c *config.Config) mapped[kafka.GokaOptions] { return gokaOptions(c, "") }),
	stageOf("windows", nil, func(c *config.Config) mapped[windows.Options] { return windowsOptions(c, c.Windows.ProcessorVersion) }),
	stageOf("reconcile", nil, reconcileOptions),
	stageOf("synthesis", nil, synthesisOptions),
	stageOf("retention", nil, retentionOptions),
	stageOf("normalize", nil, normalizeOptions),
	stageOf("webhook", nil, webhookOptions),
	stageOf("lag", nil, lagOptions),
	// no registry: the Avro single-object encoding
	stageOf("schemas", func(c *config.Config) bool { return c.Schemas.Registry.URL != "" }, registryOptions),
	// no DSN: required where needed (loadConfig's required keys)
	stageOf("postgres", func(c *config.Config) bool { return c.Postgres.DSN.IsSet() }, poolConfig),
	// the client's rules apply only to the client in use
	stageOf("openai", func(c *config.Config) bool { return c.Synthesis.Synthesizer == config.SynthesizerOpenAI }, openaiOptions),
}

// stageChecks run each used stage's Options.Check on the configured options and
// report each problem under the key that set its field.
var stageChecks = func() []config.StageCheck {
	checks := make([]config.StageCheck, len(stages))
	for i, s := range stages {
		checks[i] = func(c *config.Config) []config.Problem {
			if s.used != nil && !s.used(c) {
				return nil
			}
			_, keys, err := s.build(c)
			return c.OptionProblems(s.name, keys, err)
		}
	}
	return checks
}()

// roleOptions is what the roles are built from: each stage's options as the
// configuration sets them, mapped once (newRoleOptions) by this file's functions.
// A role takes its stage's options and adds its dependencies; no role reads the
// configuration.
type roleOptions struct {
	kafka  kafka.Options // every client's; kafkaFor names one
	goka   kafka.GokaOptions
	topics kafka.TopicNames

	windows  windows.Options // windows.processorVersion's
	stateDir string          // windows.stateDir

	pool        store.PoolConfig
	poolMissing error // postgres.dsn unset: refused where a role needs the pool

	sink       pgsink.Options
	workspaces workspaces.ConsumerOptions
	admin      workspaces.HandlerOptions
	api        httpapi.Options
	cursorKey  string
	lag        lagexport.Options

	synthesis   synthesis.Options
	synthesizer synthesizerOptions

	retentionOn bool
	retention   retention.Options

	// The Lark roles: ingest (webhook or long connection) and reconcile.
	ingestOn, reconcileOn bool
	larkSDK               larkapi.SDKOptions
	larkMissing           error // lark.appID or lark.appSecret unset
	normalize             normalize.Options
	bindings              bindings.Options
	contacts              ingest.ContactsOptions
	longConn              *ingest.LongConnOptions // nil: the webhook
	webhook               ingest.WebhookOptions
	webhookPath           string
	reconcile             reconcile.Options
}

// newRoleOptions maps cfg onto every role's options.
func newRoleOptions(cfg *config.Config) *roleOptions {
	l := cfg.Services.Workspace.Timeline.Lark
	t := cfg.Kafka.Topics
	o := &roleOptions{
		kafka: kafkaOptions(cfg, "").opts, goka: gokaOptions(cfg, "").opts, topics: topicNames(cfg),
		windows: windowsOptions(cfg, cfg.Windows.ProcessorVersion).opts, stateDir: cfg.Windows.StateDir,
		pool: poolConfig(cfg).opts, poolMissing: cfg.Require("postgres.dsn"),
		sink: pgsink.Options{Kafka: kafkaOptions(cfg, "sink").opts, Group: groupName(cfg, groupSink),
			EvidenceTopic: t.Evidence, DeadLetterTopic: t.DeadLetter},
		workspaces: workspaces.ConsumerOptions{Kafka: kafkaOptions(cfg, "workspaces").opts, Group: groupName(cfg, groupWorkspaces),
			Topic: t.Workspaces, DeadLetterTopic: t.DeadLetter},
		admin:     workspaces.HandlerOptions{AdminTokenSHA256: cfg.HTTP.AdminTokenSHA256, AdminScopeTokenSHA256: adminScopeTokens(cfg)},
		api:       httpapi.Options{Tokens: apiTokens(cfg), EvidenceListed: l.EvidenceListedInAPI},
		cursorKey: cfg.HTTP.CursorKey.Value(),
		lag:       lagOptions(cfg).opts,
		synthesis: synthesisOptions(cfg).opts, synthesizer: synthesizerOf(cfg),
		retentionOn: l.Retention.Enabled, retention: retentionOptions(cfg).opts,
		ingestOn: l.EventIngestionActive(), reconcileOn: l.ReconciliationActive(),
		larkSDK:     larkapi.SDKOptions{AppID: cfg.Lark.AppID, AppSecret: cfg.Lark.AppSecret.Value(), OpenBaseURL: cfg.Lark.OpenBaseURL},
		larkMissing: cfg.Require("lark.appID", "lark.appSecret"),
		normalize:   normalizeOptions(cfg).opts,
		bindings:    bindings.Options{WorkspaceTypes: l.WorkspaceTypes, Lookback: l.IngestionLookback},
		contacts:    ingest.ContactsOptions{RequestsPerSecond: cfg.Lark.API.RequestsPerSecond / 4},
		webhook:     webhookOptions(cfg).opts, webhookPath: cfg.Lark.WebhookPath,
		reconcile: reconcileOptions(cfg).opts,
	}
	if cfg.Lark.Mode == config.LarkModeLongConn {
		o.longConn = &ingest.LongConnOptions{AppID: cfg.Lark.AppID, AppSecret: cfg.Lark.AppSecret.Value(), Domain: cfg.Lark.OpenBaseURL}
	}
	return o
}

// kafkaFor is the Kafka options of one client, named <clientID>-<suffix>.
func (o *roleOptions) kafkaFor(suffix string) kafka.Options {
	k := o.kafka
	k.ClientID += "-" + suffix
	return k
}

// apiTokens maps http.apiTokens onto the API's tokens.
func apiTokens(cfg *config.Config) []httpapi.Token {
	tokens := make([]httpapi.Token, len(cfg.HTTP.APITokens))
	for i, t := range cfg.HTTP.APITokens {
		tokens[i] = httpapi.Token{Name: t.Name, SHA256: t.SHA256, Workspaces: t.Workspaces, Scope: t.Scope}
	}
	return tokens
}

// adminScopeTokens are the digests of the API tokens of scope admin.
func adminScopeTokens(cfg *config.Config) []string {
	var out []string
	for _, t := range cfg.HTTP.APITokens {
		if t.Scope == httpapi.ScopeAdmin {
			out = append(out, t.SHA256)
		}
	}
	return out
}
