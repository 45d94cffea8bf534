package deploytest

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/schemas/ids"
)

// Files of the Compose deployment, relative to the module root.
const (
	composeFile   = "deploy/docker-compose.yaml"
	secretsScript = "deploy/compose/secrets.sh"
	dockerfile    = "deploy/Dockerfile"
	dockerignore  = "deploy/Dockerfile.dockerignore"
)

// composeEnv is the shell environment the tests bring Compose up with: exactly the
// variables the file requires.
var composeEnv = map[string]string{"LARK_APP_ID": "cli_deploytest"}

// larklineImage is the repository part of the image the Dockerfile builds.
const larklineImage = "larkline"

type composeFileT struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
	Volumes map[string]any `yaml:"volumes"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string            `yaml:"context"`
		Dockerfile string            `yaml:"dockerfile"`
		Args       map[string]string `yaml:"args"`
	} `yaml:"build"`
	Command     []string                     `yaml:"command"`
	Environment map[string]string            `yaml:"environment"`
	Volumes     []string                     `yaml:"volumes"`
	Secrets     []string                     `yaml:"secrets"`
	Ports       []string                     `yaml:"ports"`
	Profiles    []string                     `yaml:"profiles"`
	DependsOn   map[string]composeDependency `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

type composeDependency struct {
	Condition string `yaml:"condition"`
}

// decodeCompose parses a compose file the way Compose does: YAML first (anchors and
// merge keys included), then variable substitution in every scalar value.
func decodeCompose(data []byte, env map[string]string) (cf *composeFileT, required, problems []string, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, nil, err
	}
	seen := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node, isKey bool)
	walk = func(n *yaml.Node, isKey bool) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		if n.Kind == yaml.ScalarNode && !isKey {
			v, req, probs := interpolate(n.Value, env)
			n.Value = v
			required = append(required, req...)
			problems = append(problems, probs...)
			return
		}
		for i, c := range n.Content {
			walk(c, n.Kind == yaml.MappingNode && i%2 == 0)
		}
		walk(n.Alias, false)
	}
	walk(&doc, false)
	// depends_on may be a list of names; normalise it to the mapping form.
	var raw map[string]any
	if err := doc.Decode(&raw); err != nil {
		return nil, nil, nil, err
	}
	if svcs, ok := raw["services"].(map[string]any); ok {
		for _, s := range svcs {
			svc, ok := s.(map[string]any)
			if !ok {
				continue
			}
			if list, ok := svc["depends_on"].([]any); ok {
				m := map[string]any{}
				for _, name := range list {
					m[fmt.Sprint(name)] = map[string]any{"condition": "service_started"}
				}
				svc["depends_on"] = m
			}
		}
	}
	norm, err := yaml.Marshal(raw)
	if err != nil {
		return nil, nil, nil, err
	}
	cf = &composeFileT{}
	if err := yaml.Unmarshal(norm, cf); err != nil {
		return nil, nil, nil, err
	}
	return cf, required, problems, nil
}

var interpRE = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// interpolate applies Compose's variable substitution to text: ${V}, ${V:-default},
// ${V-default}, ${V:?message}, ${V?message}, $V and $$. It returns the variables the
// text requires (:? or ?) and problems: a variable that is neither set in env nor
// given a default (Compose would silently substitute an empty string).
func interpolate(text string, env map[string]string) (out string, required, problems []string) {
	out = interpRE.ReplaceAllStringFunc(text, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sm := interpRE.FindStringSubmatch(m)
		name, op, arg := sm[1], sm[2], sm[3]
		if name == "" {
			name = sm[4]
		}
		val, set := env[name]
		switch op {
		case ":-":
			if val == "" {
				return arg
			}
			return val
		case "-":
			if !set {
				return arg
			}
			return val
		case ":?", "?":
			required = append(required, name)
			if !set || (op == ":?" && val == "") {
				problems = append(problems, fmt.Sprintf("${%s} is required (%s)", name, arg))
			}
			return val
		}
		if !set {
			problems = append(problems, fmt.Sprintf("$%s has no default and is not set: give it one (${%s:-…}) or require it (${%s:?…})", name, name, name))
		}
		return val
	})
	return out, required, problems
}

func TestInterpolate(t *testing.T) {
	env := map[string]string{"SET": "v", "EMPTY": ""}
	for _, tc := range []struct {
		in, want string
		required []string
		problems int
	}{
		{in: "a ${SET} b", want: "a v b"},
		{in: "$SET/$$HOME", want: "v/$HOME"},
		{in: "${UNSET:-d} ${EMPTY:-d} ${EMPTY-d} ${UNSET-d}", want: "d d  d"},
		{in: "${SET:?need it}", want: "v", required: []string{"SET"}},
		{in: "${EMPTY:?need it}", want: "", required: []string{"EMPTY"}, problems: 1},
		{in: "${EMPTY?need it}", want: "", required: []string{"EMPTY"}},
		{in: "${UNSET}", want: "", problems: 1},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, req, problems := interpolate(tc.in, env)
			if got != tc.want || !slices.Equal(req, tc.required) || len(problems) != tc.problems {
				t.Errorf("interpolate(%q) = %q, %v, %q; want %q, %v, %d problems", tc.in, got, req, problems, tc.want, tc.required, tc.problems)
			}
		})
	}
}

// deployment is the Compose file with everything resolved that the checks need.
type deployment struct {
	root, dir string // module root; the directory of the compose file
	file      *composeFileT
	secrets   string // directory secrets.sh wrote
}

// loadDeployment reads and interpolates the compose file and runs secrets.sh into a
// temporary directory of the test.
func loadDeployment(t *testing.T) *deployment {
	t.Helper()
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, composeFile))
	if err != nil {
		t.Fatal(err)
	}
	cf, required, problems, err := decodeCompose(data, composeEnv)
	if err != nil {
		t.Fatalf("parsing %s: %v", composeFile, err)
	}
	if len(problems) > 0 {
		t.Fatalf("interpolating %s: %s", composeFile, strings.Join(problems, "; "))
	}
	slices.Sort(required)
	required = slices.Compact(required)
	var want []string
	for k := range composeEnv {
		want = append(want, k)
	}
	slices.Sort(want)
	if !slices.Equal(required, want) {
		t.Fatalf("%s requires %v; the tests (composeEnv) and the file's header expect %v", composeFile, required, want)
	}
	secrets := filepath.Join(t.TempDir(), "secrets")
	if out, err := runSecretsScript(root, secrets, "compose-test-lark-secret"); err != nil {
		t.Fatalf("%s: %v\n%s", secretsScript, err, out)
	}
	return &deployment{root: root, dir: filepath.Dir(filepath.Join(root, composeFile)), file: cf, secrets: secrets}
}

func runSecretsScript(root, dir, larkSecret string) ([]byte, error) {
	cmd := exec.Command("bash", filepath.Join(root, secretsScript), dir)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LARK_APP_SECRET=" + larkSecret}
	return cmd.CombinedOutput()
}

// larklineServices are the services running the larkline image, by name.
func (d *deployment) larklineServices() map[string]composeService {
	out := map[string]composeService{}
	for name, s := range d.file.Services {
		if repo, _, _ := strings.Cut(s.Image, ":"); repo == larklineImage {
			out[name] = s
		}
	}
	return out
}

// roleServices are the larkline services `up` starts that run roles, with their roles.
func (d *deployment) roleServices(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for name, s := range d.larklineServices() {
		if len(s.Command) == 0 || s.Command[0] != "run" || len(s.Profiles) > 0 {
			continue
		}
		roles := ""
		for i, a := range s.Command {
			if v, ok := strings.CutPrefix(a, "--roles="); ok {
				roles = v
			} else if a == "--roles" && i+1 < len(s.Command) {
				roles = s.Command[i+1]
			}
		}
		if roles == "" {
			t.Errorf("service %s: run without --roles", name)
			continue
		}
		out[name] = strings.Split(roles, ",")
	}
	return out
}

// hostPath maps a container path of a service to the host file mounted there
// (a bind mount of that file or of a directory above it).
func (d *deployment) hostPath(s composeService, containerPath string) (string, bool) {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !(strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/")) {
			continue
		}
		src, dst := parts[0], parts[1]
		if containerPath == dst {
			return filepath.Join(d.dir, src), true
		}
		if rest, ok := strings.CutPrefix(containerPath, dst+"/"); ok {
			return filepath.Join(d.dir, src, rest), true
		}
	}
	return "", false
}

// secretHostPath maps /run/secrets/<name> of a service to the file secrets.sh wrote.
func (d *deployment) secretHostPath(s composeService, containerPath string) (string, error) {
	name, ok := strings.CutPrefix(containerPath, "/run/secrets/")
	if !ok {
		return "", fmt.Errorf("%s is not under /run/secrets", containerPath)
	}
	if !slices.Contains(s.Secrets, name) {
		return "", fmt.Errorf("secret %s is not mounted in this service", name)
	}
	top, ok := d.file.Secrets[name]
	if !ok {
		return "", fmt.Errorf("secret %s is not declared at the top level", name)
	}
	return filepath.Join(d.secrets, filepath.Base(top.File)), nil
}

// knownRoles is the roles larkline run knows: every stage is one (D30;
// cmd/larkline's TestEveryStageIsARole holds roleBuilders to ids.Stages).
func knownRoles(t *testing.T) []string {
	t.Helper()
	var roles []string
	for _, st := range ids.Stages {
		roles = append(roles, string(st))
	}
	slices.Sort(roles)
	return roles
}

// TestComposeRoles: every role the binary knows runs in exactly one service.
func TestComposeRoles(t *testing.T) {
	d := loadDeployment(t)
	known := knownRoles(t)
	where := map[string]string{}
	for svc, roles := range d.roleServices(t) {
		for _, r := range roles {
			if !slices.Contains(known, r) {
				t.Errorf("service %s runs role %q, which larkline does not know (known: %v)", svc, r, known)
			}
			if other, ok := where[r]; ok {
				t.Errorf("role %s runs in both %s and %s: scale one service instead", r, other, svc)
			}
			where[r] = svc
		}
	}
	for _, r := range known {
		if _, ok := where[r]; !ok {
			t.Errorf("no service of %s runs role %s", composeFile, r)
		}
	}
}

// TestComposeConfiguration loads, for every larkline service, the configuration the
// container would load: the mounted file, its environment and its secret files.
func TestComposeConfiguration(t *testing.T) {
	d := loadDeployment(t)
	keys, err := config.Keys()
	if err != nil {
		t.Fatal(err)
	}
	envKeys := map[string]bool{}
	for _, k := range keys {
		envKeys[k.Env] = true
		if k.Env != config.EnvName(k.Path) {
			t.Fatalf("config key %s: Env %s differs from EnvName %s", k.Path, k.Env, config.EnvName(k.Path))
		}
	}
	pg := d.service(t, "postgres")
	roleSvcs := d.roleServices(t)
	svcs := d.larklineServices()
	if len(svcs) == 0 {
		t.Fatalf("no service runs the %s image", larklineImage)
	}
	for name, s := range svcs {
		t.Run(name, func(t *testing.T) {
			if s.Build == nil || filepath.Clean(filepath.Join(d.dir, s.Build.Context, s.Build.Dockerfile)) != filepath.Join(d.root, dockerfile) {
				t.Errorf("build must use %s with the module root as context", dockerfile)
			}
			var env []string
			cfgPath := ""
			for k, v := range s.Environment {
				switch {
				case k == config.EnvConfigFile:
					p, ok := d.hostPath(s, v)
					if !ok {
						t.Errorf("%s=%s is not a mounted file", k, v)
					}
					cfgPath = p
					continue
				case !strings.HasPrefix(k, config.EnvPrefix):
					t.Errorf("environment %s: larkline reads only %s variables", k, config.EnvPrefix)
					continue
				case !envKeys[k]:
					t.Errorf("environment %s names no configuration key (internal/config Keys)", k)
					continue
				}
				if strings.HasPrefix(v, "/run/secrets/") {
					hp, err := d.secretHostPath(s, v)
					if err != nil {
						t.Errorf("environment %s=%s: %v", k, v, err)
						continue
					}
					v = hp
				}
				env = append(env, k+"="+v)
			}
			if cfgPath == "" {
				t.Fatalf("no %s: every larkline service names its configuration file", config.EnvConfigFile)
			}
			cfg, err := config.Load(cfgPath, env)
			if err != nil {
				t.Fatalf("the configuration of service %s does not load: %v", name, err)
			}
			if err := cfg.Require("postgres.dsn"); err != nil {
				t.Errorf("%v", err)
			}
			// The listener must be reachable from Prometheus and the other containers.
			host, port, err := net.SplitHostPort(cfg.HTTP.Listen)
			if err != nil || !slices.Contains([]string{"", "0.0.0.0", "::"}, host) {
				t.Errorf("http.listen %q must listen on all interfaces inside the container", cfg.HTTP.Listen)
			}
			if _, ok := roleSvcs[name]; ok {
				d.checkScraped(t, name, port)
			}
			// Kafka and Postgres are the compose services.
			for _, b := range cfg.Kafka.Brokers {
				h, _, err := net.SplitHostPort(b)
				if err != nil || !strings.HasPrefix(d.file.Services[h].Image, "apache/kafka:") {
					t.Errorf("kafka.brokers %q is not the compose Kafka service", b)
				}
			}
			if cfg.Kafka.ReplicationFactor != 1 {
				t.Errorf("kafka.replicationFactor %d: the compose cluster has one broker", cfg.Kafka.ReplicationFactor)
			}
			d.checkDSN(t, cfg.Postgres.DSN.Value(), pg)
			if !strings.HasPrefix(cfg.Windows.StateDir, "/var/lib/larkline/") {
				t.Errorf("windows.stateDir %q is not under /var/lib/larkline, the directory the image makes writable", cfg.Windows.StateDir)
			}
		})
	}
}

func (d *deployment) service(t *testing.T, name string) composeService {
	t.Helper()
	s, ok := d.file.Services[name]
	if !ok {
		t.Fatalf("%s has no service %s", composeFile, name)
	}
	return s
}

// checkDSN compares the DSN secrets.sh wrote with the Postgres service's user,
// database and password.
func (d *deployment) checkDSN(t *testing.T, dsn string, pg composeService) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Errorf("postgres.dsn does not parse as a URL: %v", err)
		return
	}
	pwFile, err := d.secretHostPath(pg, pg.Environment["POSTGRES_PASSWORD_FILE"])
	if err != nil {
		t.Errorf("postgres POSTGRES_PASSWORD_FILE: %v", err)
		return
	}
	pw, err := os.ReadFile(pwFile)
	if err != nil {
		t.Error(err)
		return
	}
	gotPW, _ := u.User.Password()
	if u.Hostname() != "postgres" || u.User.Username() != pg.Environment["POSTGRES_USER"] ||
		strings.TrimPrefix(u.Path, "/") != pg.Environment["POSTGRES_DB"] || gotPW != strings.TrimSpace(string(pw)) {
		t.Errorf("postgres.dsn (host %s, user %s, database %s) does not match the postgres service (user %s, database %s) or its password",
			u.Hostname(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), pg.Environment["POSTGRES_USER"], pg.Environment["POSTGRES_DB"])
	}
}

// promConfig is the part of prometheus.yml the checks read.
type promConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		DNSSDConfigs []struct {
			Names []string `yaml:"names"`
			Type  string   `yaml:"type"`
			Port  int      `yaml:"port"`
		} `yaml:"dns_sd_configs"`
		RelabelConfigs []struct {
			TargetLabel string `yaml:"target_label"`
			Replacement string `yaml:"replacement"`
		} `yaml:"relabel_configs"`
	} `yaml:"scrape_configs"`
}

func (d *deployment) prometheus(t *testing.T) (*promConfig, composeService) {
	t.Helper()
	var svc composeService
	for _, s := range d.file.Services {
		if strings.HasPrefix(s.Image, "prom/prometheus:") {
			svc = s
		}
	}
	p, ok := d.hostPath(svc, "/etc/prometheus/prometheus.yml")
	if !ok {
		t.Fatal("no Prometheus service with a mounted /etc/prometheus/prometheus.yml")
	}
	pc := &promConfig{}
	readYAML(t, p, pc)
	return pc, svc
}

// checkScraped: the larkline job scrapes service svc on port at /metrics.
func (d *deployment) checkScraped(t *testing.T, svc, port string) {
	t.Helper()
	pc, _ := d.prometheus(t)
	for _, sc := range pc.ScrapeConfigs {
		if sc.JobName != "larkline" || (sc.MetricsPath != "" && sc.MetricsPath != "/metrics") {
			continue
		}
		for _, sd := range sc.DNSSDConfigs {
			if slices.Contains(sd.Names, svc) && strconv.Itoa(sd.Port) == port {
				return
			}
		}
		for _, st := range sc.StaticConfigs {
			if slices.Contains(st.Targets, net.JoinHostPort(svc, port)) {
				return
			}
		}
	}
	t.Errorf("Prometheus job larkline does not scrape %s:%s/metrics", svc, port)
}

// TestComposeMonitoring: Prometheus loads the alert rules and scrapes only services
// that exist; Grafana is provisioned with the data source and the dashboard.
func TestComposeMonitoring(t *testing.T) {
	d := loadDeployment(t)
	pc, ps := d.prometheus(t)
	alertsIn := ""
	for _, v := range ps.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && filepath.Join(d.dir, parts[0]) == filepath.Join(d.root, alertsFile) {
			alertsIn = parts[1]
		}
	}
	if alertsIn == "" {
		t.Errorf("the Prometheus service does not mount %s", alertsFile)
	}
	loaded := false
	for _, pat := range pc.RuleFiles {
		if ok, _ := path.Match(pat, alertsIn); ok {
			loaded = true
		}
	}
	if !loaded {
		t.Errorf("rule_files %v do not match %s, where the alert rules are mounted", pc.RuleFiles, alertsIn)
	}
	for _, sc := range pc.ScrapeConfigs {
		for _, sd := range sc.DNSSDConfigs {
			for _, n := range sd.Names {
				if _, ok := d.file.Services[n]; !ok {
					t.Errorf("job %s resolves %s, which is not a compose service", sc.JobName, n)
				}
			}
		}
		for _, rc := range sc.RelabelConfigs {
			if rc.TargetLabel == "__address__" {
				h, _, err := net.SplitHostPort(rc.Replacement)
				if _, ok := d.file.Services[h]; err != nil || !ok {
					t.Errorf("job %s sends scrapes to %q, which is not a compose service", sc.JobName, rc.Replacement)
				}
			}
		}
	}

	// Grafana.
	var gs composeService
	for _, s := range d.file.Services {
		if strings.HasPrefix(s.Image, "grafana/grafana") {
			gs = s
		}
	}
	prov, ok := d.hostPath(gs, "/etc/grafana/provisioning")
	if !ok {
		t.Fatal("no Grafana service with /etc/grafana/provisioning mounted")
	}
	var ds struct {
		Datasources []struct {
			UID, Type, URL string
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(prov, "datasources", "prometheus.yaml"), &ds)
	okDS := false
	for _, x := range ds.Datasources {
		if u, err := url.Parse(x.URL); err == nil && x.Type == "prometheus" && strings.HasPrefix(d.file.Services[u.Hostname()].Image, "prom/prometheus:") {
			okDS = true
		}
	}
	if !okDS {
		t.Errorf("Grafana has no prometheus data source pointing at the Prometheus service: %+v", ds.Datasources)
	}
	var dp struct {
		Providers []struct {
			Type    string
			Options struct{ Path string }
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(prov, "dashboards", "larkline.yaml"), &dp)
	mountedAt := ""
	for _, v := range gs.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && filepath.Join(d.dir, parts[0]) == filepath.Join(d.root, dashboardFile) {
			mountedAt = parts[1]
		}
	}
	okDash := false
	for _, p := range dp.Providers {
		if p.Type == "file" && mountedAt != "" && strings.HasPrefix(mountedAt, strings.TrimSuffix(p.Options.Path, "/")+"/") {
			okDash = true
		}
	}
	if !okDash {
		t.Errorf("Grafana does not load %s: mounted at %q, providers %+v", dashboardFile, mountedAt, dp.Providers)
	}
}

func readYAML(t *testing.T, p string, v any) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

// TestComposeWiring: start order, mounts, secrets, images and published ports.
func TestComposeWiring(t *testing.T) {
	d := loadDeployment(t)
	for name, s := range d.file.Services {
		t.Run(name, func(t *testing.T) {
			if s.Image == "" {
				t.Fatal("no image")
			}
			repo, tag, _ := strings.Cut(s.Image, ":")
			if repo != larklineImage && (tag == "" || tag == "latest") {
				t.Errorf("image %s: pin a version", s.Image)
			}
			for dep, c := range s.DependsOn {
				ds, ok := d.file.Services[dep]
				switch {
				case !ok:
					t.Errorf("depends on %s, which does not exist", dep)
				case c.Condition == "service_healthy" && ds.Healthcheck == nil:
					t.Errorf("waits for %s to be healthy, which has no healthcheck", dep)
				}
			}
			for _, v := range s.Volumes {
				src, _, _ := strings.Cut(v, ":")
				if strings.HasPrefix(src, ".") {
					if _, err := os.Stat(filepath.Join(d.dir, src)); err != nil {
						t.Errorf("volume %s: %v", v, err)
					}
				} else if _, ok := d.file.Volumes[src]; !ok && !strings.HasPrefix(src, "/") {
					t.Errorf("volume %s: named volume %s is not declared", v, src)
				}
			}
			for _, sec := range s.Secrets {
				top, ok := d.file.Secrets[sec]
				if !ok {
					t.Errorf("secret %s is not declared", sec)
					continue
				}
				if _, err := os.Stat(filepath.Join(d.secrets, filepath.Base(top.File))); err != nil {
					t.Errorf("secret %s: %s does not write it: %v", sec, secretsScript, err)
				}
			}
			for _, p := range s.Ports {
				if !strings.HasPrefix(p, "127.0.0.1:") {
					t.Errorf("port %s: publish on 127.0.0.1 only (nothing here has authentication in front)", p)
				}
			}
		})
	}
	for name, sec := range d.file.Secrets {
		if filepath.Clean(filepath.Join(d.dir, filepath.Dir(sec.File))) != filepath.Join(d.root, "deploy/compose/secrets") {
			t.Errorf("secret %s: file %s is not in deploy/compose/secrets, where %s writes and .gitignore ignores", name, sec.File, secretsScript)
		}
	}
	// Start order: set-up before roles, dependencies healthy before set-up.
	for svc := range d.roleServices(t) {
		deps := d.file.Services[svc].DependsOn
		for _, setup := range []string{"topics", "migrate"} {
			if deps[setup].Condition != "service_completed_successfully" {
				t.Errorf("%s must wait for %s to complete successfully", svc, setup)
			}
		}
	}
	if c := d.service(t, "topics"); !slices.Equal(c.Command, []string{"topics", "ensure"}) || c.DependsOn["kafka"].Condition != "service_healthy" {
		t.Errorf("topics: command %v, depends_on %v; want topics ensure after a healthy kafka", c.Command, c.DependsOn)
	}
	if c := d.service(t, "migrate"); !slices.Equal(c.Command, []string{"migrate"}) || c.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("migrate: command %v, depends_on %v; want migrate after a healthy postgres", c.Command, c.DependsOn)
	}
	if img := d.service(t, "postgres").Image; !strings.HasPrefix(img, "postgres:15") {
		t.Errorf("postgres image %s: larkline targets PostgreSQL 15", img)
	}
}

// TestSecretsScript: secrets.sh writes every file private to the user, never rotates
// by surprise, and refuses to finish without the Lark app secret.
func TestSecretsScript(t *testing.T) {
	root := repoRoot(t)
	dir := filepath.Join(t.TempDir(), "secrets")
	if out, err := runSecretsScript(root, dir, "s3cret"); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v (%v), want 0700", st.Mode().Perm(), err)
	}
	files := []string{"postgres_password", "postgres_dsn", "grafana_admin_password", "lark_app_secret"}
	before := map[string][]byte{}
	for _, f := range files {
		p := filepath.Join(dir, f)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s not written: %v", f, err)
		}
		if st.Mode().Perm() != 0o644 {
			t.Errorf("%s mode %v, want 0644 (readable by the containers' users, guarded by the 0700 directory)", f, st.Mode().Perm())
		}
		before[f], _ = os.ReadFile(p)
	}
	if got := strings.TrimSpace(string(before["lark_app_secret"])); got != "s3cret" {
		t.Errorf("lark_app_secret = %q, want the LARK_APP_SECRET given", got)
	}
	if pw := strings.TrimSpace(string(before["postgres_password"])); len(pw) < 32 || !bytes.Contains(before["postgres_dsn"], []byte(":"+pw+"@postgres:5432/")) {
		t.Errorf("postgres_dsn %q does not carry the generated password", before["postgres_dsn"])
	}
	if bytes.Equal(before["postgres_password"], before["grafana_admin_password"]) {
		t.Error("two generated secrets are equal")
	}
	if out, err := runSecretsScript(root, dir, "other"); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	for _, f := range files {
		after, _ := os.ReadFile(filepath.Join(dir, f))
		if !bytes.Equal(after, before[f]) {
			t.Errorf("a second run changed %s", f)
		}
	}
	fresh := filepath.Join(t.TempDir(), "secrets")
	out, err := runSecretsScript(root, fresh, "")
	if err == nil || !strings.Contains(string(out), "LARK_APP_SECRET") {
		t.Errorf("without LARK_APP_SECRET: err %v, output %q; want a failure naming LARK_APP_SECRET", err, out)
	}
	if _, err := os.Stat(filepath.Join(fresh, "postgres_dsn")); err != nil {
		t.Errorf("without LARK_APP_SECRET the other secrets are still written: %v", err)
	}
}

// TestDockerfile: multi-stage, builds cmd/larkline with the Go of go.mod, runs as a
// non-root user, bakes in no secret, and keeps secrets out of the build context.
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, dockerfile))
	if err != nil {
		t.Fatal(err)
	}
	var froms []int
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(strings.ToUpper(l), "FROM ") {
			froms = append(froms, len(lines))
		}
		lines = append(lines, l)
	}
	if len(froms) < 2 {
		t.Fatalf("%s has %d stages; build in one, run in a minimal other", dockerfile, len(froms))
	}
	final := lines[froms[len(froms)-1]:]
	user := ""
	secretish := regexp.MustCompile(`(?i)(secret|token|passw|apikey|api_key|dsn|credential|private)`)
	for _, l := range lines {
		f := strings.Fields(l)
		switch strings.ToUpper(f[0]) {
		case "ENV", "ARG":
			for _, kv := range f[1:] {
				if name, _, _ := strings.Cut(kv, "="); secretish.MatchString(name) {
					t.Errorf("%s: %q looks like a secret baked into the image", dockerfile, l)
				}
			}
		case "COPY", "ADD":
			if strings.Contains(l, "secrets") {
				t.Errorf("%s: %q copies secrets", dockerfile, l)
			}
		}
	}
	for _, l := range final {
		if f := strings.Fields(l); strings.ToUpper(f[0]) == "USER" && len(f) > 1 {
			user = f[1]
		}
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "root" || u == "0" {
		t.Errorf("the final stage runs as %q; it must name a non-root USER", user)
	}
	if !strings.Contains(string(data), "./cmd/larkline") {
		t.Errorf("%s does not build ./cmd/larkline", dockerfile)
	}
	goVersion := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\d+\.\d+)`).FindStringSubmatch(string(data))
	mod, _ := os.ReadFile(filepath.Join(root, "go.mod"))
	modGo := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(mod))
	if goVersion == nil || modGo == nil || goVersion[1] != modGo[1] {
		t.Errorf("ARG GO_VERSION %v does not match go.mod's go %v", goVersion, modGo)
	}
	ignore, err := os.ReadFile(filepath.Join(root, dockerignore))
	if err != nil {
		t.Fatalf("%s: %v (BuildKit reads it for %s)", dockerignore, err, dockerfile)
	}
	for _, must := range []string{".git", "deploy/compose/secrets"} {
		if !slices.Contains(strings.Split(string(ignore), "\n"), must) {
			t.Errorf("%s does not exclude %s from the build context", dockerignore, must)
		}
	}
}
