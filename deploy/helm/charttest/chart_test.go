package charttest

import (
	"bufio"
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/kafka"
)

const (
	chartDir = "../larkline"
	repoRoot = "../../.."
)

// larklineRoles are every role `larkline run --roles` knows (cmd/larkline's
// roleBuilders); each must run in exactly one Deployment.
var larklineRoles = []string{"api", "ingest", "lag", "reconcile", "retention", "sink", "synthesis", "windows", "workspaces"}

// objects is one rendering, decoded into typed structs.
type objects struct {
	deployments map[string]appsv1.Deployment
	pdbs        []policyv1.PodDisruptionBudget
	configMaps  []corev1.ConfigMap
	secrets     []corev1.Secret
	services    []corev1.Service
	jobs        []batchv1.Job
	// custom resources, decoded loosely
	serviceMonitors []map[string]any
	rules           []promRule
	topics          []kafkaTopic
	users           []kafkaUser
}

type promRule struct {
	Spec struct {
		Groups []any `json:"groups"`
	} `json:"spec"`
}

type kafkaTopic struct {
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		TopicName  string            `json:"topicName"`
		Partitions int32             `json:"partitions"`
		Replicas   int16             `json:"replicas"`
		Config     map[string]string `json:"config"`
	} `json:"spec"`
}

type kafkaUser struct {
	Spec struct {
		Authorization struct {
			ACLs []struct {
				Resource struct {
					Type        string `json:"type"`
					Name        string `json:"name"`
					PatternType string `json:"patternType"`
				} `json:"resource"`
				Operations []string `json:"operations"`
			} `json:"acls"`
		} `json:"authorization"`
	} `json:"spec"`
}

// render renders the chart with values over its defaults and decodes every object
// strictly into its k8s.io/api type (an unknown field is an error).
func render(t *testing.T, values map[string]any) objects {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	vals, err := util.ToRenderValues(ch, values, common.ReleaseOptions{Name: "prod", Namespace: "timeline", IsInstall: true}, common.DefaultCapabilities)
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	o := objects{deployments: map[string]appsv1.Deployment{}}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range strings.Split(files[name], "\n---") {
			if strings.TrimSpace(strings.ReplaceAll(doc, "---", "")) == "" {
				continue
			}
			var head struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			strict := func(v any) {
				if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
					t.Fatalf("%s: %s does not decode into its type: %v\n%s", name, head.Kind, err, doc)
				}
			}
			switch head.Kind {
			case "Deployment":
				var d appsv1.Deployment
				strict(&d)
				o.deployments[d.Name] = d
			case "PodDisruptionBudget":
				var p policyv1.PodDisruptionBudget
				strict(&p)
				o.pdbs = append(o.pdbs, p)
			case "ConfigMap":
				var c corev1.ConfigMap
				strict(&c)
				o.configMaps = append(o.configMaps, c)
			case "Secret":
				var s corev1.Secret
				strict(&s)
				o.secrets = append(o.secrets, s)
			case "Service":
				var s corev1.Service
				strict(&s)
				o.services = append(o.services, s)
			case "Job":
				var j batchv1.Job
				strict(&j)
				o.jobs = append(o.jobs, j)
			case "ServiceMonitor":
				var m map[string]any
				strict(&m)
				o.serviceMonitors = append(o.serviceMonitors, m)
			case "PrometheusRule":
				var r promRule
				if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
					t.Fatal(err)
				}
				o.rules = append(o.rules, r)
			case "KafkaTopic":
				var k kafkaTopic
				if err := yaml.Unmarshal([]byte(doc), &k); err != nil {
					t.Fatal(err)
				}
				o.topics = append(o.topics, k)
			case "KafkaUser":
				var u kafkaUser
				if err := yaml.Unmarshal([]byte(doc), &u); err != nil {
					t.Fatal(err)
				}
				o.users = append(o.users, u)
			default:
				t.Fatalf("%s: unexpected kind %q", name, head.Kind)
			}
		}
	}
	return o
}

var everything = map[string]any{
	"secrets":        map[string]any{"secretData": map[string]any{"postgres-dsn": "postgres://app@db/larkline", "lark-app-secret": "x"}},
	"serviceMonitor": map[string]any{"enabled": true},
	"prometheusRule": map[string]any{"enabled": true},
	"strimzi":        map[string]any{"topics": map[string]any{"enabled": true}, "user": map[string]any{"enabled": true}},
}

// TestChartDeployments: every role runs in exactly one Deployment, every Deployment
// has liveness and readiness probes on /livez and /readyz, resource requests, a
// non-root read-only container and a PodDisruptionBudget selecting its pods; the
// migrate Job is a pre-install/pre-upgrade hook running `larkline migrate`.
func TestChartDeployments(t *testing.T) {
	o := render(t, everything)
	if len(o.deployments) == 0 {
		t.Fatal("no Deployment rendered")
	}
	seen := map[string]string{}
	for name, d := range o.deployments {
		c := d.Spec.Template.Spec.Containers
		if len(c) != 1 {
			t.Fatalf("%s: %d containers", name, len(c))
		}
		args := c[0].Args
		if len(args) != 3 || args[0] != "run" || args[1] != "--roles" {
			t.Fatalf("%s: args %v, want run --roles …", name, args)
		}
		for _, r := range strings.Split(args[2], ",") {
			if !slices.Contains(larklineRoles, r) {
				t.Errorf("%s runs unknown role %q", name, r)
			}
			if prev, dup := seen[r]; dup {
				t.Errorf("role %s runs in %s and %s", r, prev, name)
			}
			seen[r] = name
		}
		lp, rp := c[0].LivenessProbe, c[0].ReadinessProbe
		if lp == nil || lp.HTTPGet == nil || lp.HTTPGet.Path != "/livez" || rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: probes %+v / %+v, want liveness /livez and readiness /readyz", name, lp, rp)
		}
		if c[0].Resources.Requests.Memory().IsZero() || c[0].Resources.Requests.Cpu().IsZero() {
			t.Errorf("%s: no cpu and memory requests", name)
		}
		sc := d.Spec.Template.Spec.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || c[0].SecurityContext == nil || c[0].SecurityContext.ReadOnlyRootFilesystem == nil || !*c[0].SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("%s: must run as non-root with a read-only root filesystem", name)
		}
		covered := false
		for _, p := range o.pdbs {
			covered = covered || reflect.DeepEqual(p.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels)
		}
		if !covered {
			t.Errorf("%s: no PodDisruptionBudget selects its pods", name)
		}
	}
	for _, r := range larklineRoles {
		if seen[r] == "" {
			t.Errorf("role %s runs in no Deployment", r)
		}
	}
	if len(o.jobs) != 1 {
		t.Fatalf("%d Jobs, want the migrate hook", len(o.jobs))
	}
	j := o.jobs[0]
	if hook := j.Annotations["helm.sh/hook"]; hook != "pre-install,pre-upgrade" || !slices.Equal(j.Spec.Template.Spec.Containers[0].Args, []string{"migrate"}) {
		t.Errorf("migrate job: hook %q, args %v", hook, j.Spec.Template.Spec.Containers[0].Args)
	}
}

// TestChartConfigLoads: the ConfigMap's larkline.yaml loads and validates with
// larkline's own loader (its secret files provided), as every role would.
func TestChartConfigLoads(t *testing.T) {
	o := render(t, everything)
	if len(o.configMaps) != 1 {
		t.Fatalf("%d ConfigMaps", len(o.configMaps))
	}
	text := o.configMaps[0].Data["larkline.yaml"]
	dir := t.TempDir()
	for _, s := range []string{"postgres-dsn", "lark-app-secret"} {
		if err := os.WriteFile(filepath.Join(dir, s), []byte("postgres://app@db/larkline?sslmode=require"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	text = strings.ReplaceAll(text, "/etc/larkline/secrets/", dir+"/")
	p := filepath.Join(dir, "larkline.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p, nil)
	if err != nil {
		t.Fatalf("the chart's configuration does not load:\n%s\n%v", text, err)
	}
	if cfg.Kafka.ManageTopics || cfg.HTTP.Listen != "0.0.0.0:8080" {
		t.Errorf("manageTopics %v, listen %q", cfg.Kafka.ManageTopics, cfg.HTTP.Listen)
	}
}

// TestChartMonitoring: the PrometheusRule carries deploy/prometheus/alerts.yaml's
// groups unchanged (the chart's copy is the same file) and the ServiceMonitor
// selects the metrics Service and sets job="larkline", as the alerts expect.
func TestChartMonitoring(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot, "deploy/prometheus/alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(filepath.Join(chartDir, "files/alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, cp) {
		t.Fatal("deploy/helm/larkline/files/alerts.yaml differs from deploy/prometheus/alerts.yaml: copy it")
	}
	var want struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(src, &want); err != nil {
		t.Fatal(err)
	}
	o := render(t, everything)
	if len(o.rules) != 1 || !reflect.DeepEqual(o.rules[0].Spec.Groups, want.Groups) {
		t.Fatalf("the PrometheusRule's groups differ from alerts.yaml (%d rules objects)", len(o.rules))
	}
	var metrics []corev1.Service
	for _, s := range o.services {
		if s.Labels["larkline.io/metrics"] == "true" {
			metrics = append(metrics, s)
		}
	}
	if len(o.serviceMonitors) != 1 || len(metrics) != 1 {
		t.Fatalf("%d ServiceMonitors, %d metrics Services", len(o.serviceMonitors), len(metrics))
	}
	sm, _ := yaml.Marshal(o.serviceMonitors[0])
	for k, v := range metrics[0].Labels {
		if k == "larkline.io/metrics" && !strings.Contains(string(sm), k+": \""+v+"\"") {
			t.Errorf("the ServiceMonitor does not select the metrics Service's label %s=%s:\n%s", k, v, sm)
		}
	}
	if !strings.Contains(string(sm), "replacement: larkline") {
		t.Errorf("the ServiceMonitor does not set job=larkline:\n%s", sm)
	}
	none := render(t, nil)
	if len(none.rules)+len(none.serviceMonitors)+len(none.topics)+len(none.users) != 0 {
		t.Error("the optional resources render by default")
	}
}

// TestChartStrimzi: the KafkaTopics are exactly the topics larkline checks
// (kafka.DefaultTopicSpecs and Goka's, kafka.GokaTopicSpecs) and the KafkaUser's
// ACLs are exactly the documented ones (docs/operations.md, which test/e2e proves
// sufficient against CheckAccess on a secured broker), with and without
// kafka.manageTopics.
func TestChartStrimzi(t *testing.T) {
	o := render(t, everything)
	cfg := config.Default()
	specs := append(kafka.DefaultTopicSpecs(kafka.DefaultTopicNames(), cfg.Kafka.Partitions, cfg.Kafka.ReplicationFactor),
		kafka.GokaTopicSpecs("larkline-windows-v1", cfg.Kafka.Partitions, cfg.Kafka.ReplicationFactor, cfg.Kafka.ReplicationFactor, 0)...)
	specs = append(specs, kafka.GeometryTopicSpec("larkline-windows-v1", cfg.Kafka.ReplicationFactor))
	got := map[string]kafkaTopic{}
	for _, k := range o.topics {
		got[k.Spec.TopicName] = k
		if k.Metadata.Labels["strimzi.io/cluster"] != "my-cluster" {
			t.Errorf("KafkaTopic %s: no strimzi.io/cluster label", k.Metadata.Name)
		}
	}
	if len(got) != len(specs) {
		t.Errorf("%d KafkaTopics, want %d", len(got), len(specs))
	}
	for _, s := range specs {
		k, ok := got[s.Name]
		switch {
		case !ok:
			t.Errorf("no KafkaTopic for %s", s.Name)
		case k.Spec.Partitions != s.Partitions || k.Spec.Replicas != s.Replication || !maps.Equal(k.Spec.Config, s.Configs):
			t.Errorf("KafkaTopic %s: %d partitions, %d replicas, %v; larkline wants %d, %d, %v",
				s.Name, k.Spec.Partitions, k.Spec.Replicas, k.Spec.Config, s.Partitions, s.Replication, s.Configs)
		}
	}
	for _, tc := range []struct {
		manage  bool
		section string
	}{{false, "Topics managed by the platform team"}, {true, "Secured cluster"}} {
		vals := map[string]any{"strimzi": map[string]any{"user": map[string]any{"enabled": true}},
			"config": map[string]any{"kafka": map[string]any{"manageTopics": tc.manage}}}
		u := render(t, vals).users
		if len(u) != 1 {
			t.Fatalf("%d KafkaUsers", len(u))
		}
		var gotACLs []string
		for _, a := range u[0].Spec.Authorization.ACLs {
			if a.Resource.PatternType != "prefix" {
				t.Errorf("ACL on %s %s is not prefixed", a.Resource.Type, a.Resource.Name)
			}
			for _, op := range a.Operations {
				gotACLs = append(gotACLs, a.Resource.Type+" "+a.Resource.Name+" "+op)
			}
		}
		sort.Strings(gotACLs)
		want := docACLs(t, tc.section, "larkline.", "larkline")
		if !slices.Equal(gotACLs, want) {
			t.Errorf("manageTopics %v: KafkaUser ACLs\n%v\nwant docs/operations.md %q\n%v", tc.manage, gotACLs, tc.section, want)
		}
	}
}

// docACLs are the kafka-acls.sh rules of a docs/operations.md section as
// "<resource> <name> <operation>", sorted.
func docACLs(t *testing.T, section, topicPrefix, groupPrefix string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(string(b), "\n## "+section+"\n")
	if !ok {
		t.Fatalf("docs/operations.md has no %q section", section)
	}
	text, _, _ = strings.Cut(text, "\n## ")
	var out []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "kafka-acls.sh" {
			continue
		}
		var res, name, op string
		for i := 1; i+1 < len(f); i++ {
			v, _ := strconv.Unquote(f[i+1])
			if v == "" {
				v = f[i+1]
			}
			v = strings.NewReplacer("$TOPIC_PREFIX", topicPrefix, "$GROUP_PREFIX", groupPrefix).Replace(v)
			switch f[i] {
			case "--operation":
				op = v
			case "--topic":
				res, name = "topic", v
			case "--group":
				res, name = "group", v
			}
		}
		out = append(out, res+" "+name+" "+op)
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatalf("no kafka-acls.sh rule in %q", section)
	}
	return out
}

// TestChartPublicSurface (issue #29): the webhook has a Service of its own with only
// the webhook port, selecting the pods that run ingest; the API likewise; the config
// makes each listener listen on the container port its Service targets, and the ops
// port is on neither Service.
func TestChartPublicSurface(t *testing.T) {
	o := render(t, everything)
	var cfg struct {
		HTTP struct {
			Listen, APIListen, WebhookListen string
		} `json:"http"`
	}
	if err := yaml.Unmarshal([]byte(o.configMaps[0].Data["larkline.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	listens := map[string]string{"http": cfg.HTTP.Listen, "api": cfg.HTTP.APIListen, "webhook": cfg.HTTP.WebhookListen}
	for _, tt := range []struct{ service, port, role string }{{"webhook", "webhook", "ingest"}, {"api", "api", "api"}} {
		var svc *corev1.Service
		for i := range o.services {
			if strings.HasSuffix(o.services[i].Name, "-"+tt.service) {
				svc = &o.services[i]
			}
		}
		if svc == nil {
			t.Fatalf("no %s Service", tt.service)
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != tt.port {
			t.Fatalf("%s Service ports %+v, want only the %s port", svc.Name, svc.Spec.Ports, tt.port)
		}
		selected := 0
		for name, d := range o.deployments {
			if !selects(svc.Spec.Selector, d.Spec.Template.Labels) {
				continue
			}
			selected++
			c := d.Spec.Template.Spec.Containers[0]
			if !slices.Contains(strings.Split(c.Args[2], ","), tt.role) {
				t.Errorf("%s Service selects %s, which does not run %s", svc.Name, name, tt.role)
			}
			var port int32
			for _, p := range c.Ports {
				if p.Name == tt.port {
					port = p.ContainerPort
				}
			}
			if _, p, _ := strings.Cut(listens[tt.port], ":"); port == 0 || p != strconv.Itoa(int(port)) || !strings.HasPrefix(listens[tt.port], "0.0.0.0:") {
				t.Errorf("%s: container port %s = %d, config listens on %q", name, tt.port, port, listens[tt.port])
			}
		}
		if selected == 0 {
			t.Errorf("%s Service selects no Deployment", svc.Name)
		}
	}
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}
