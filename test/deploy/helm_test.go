package deploy

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/slaprobe/slaprobe/internal/config"
)

var update = flag.Bool("update", false, "rewrite deploy/kubernetes/*.yaml from the chart, and testdata/rollouts-rendered.json")

const chartDir = "deploy/helm/slaprobe"

// rendered is one rendering of the chart, every object decoded strictly into its API type.
type rendered struct {
	docs        map[string][]string // template file → its documents
	deployment  *appsv1.Deployment
	service     *corev1.Service
	configMap   *corev1.ConfigMap
	secrets     []*corev1.Secret
	netpol      *networkingv1.NetworkPolicy
	monitor     *monitoringv1.ServiceMonitor
	rule        *monitoringv1.PrometheusRule
	notes       string
	slaprobeCfg *config.Config
}

// render renders the chart with the values (YAML) as `helm template <release>` does.
func render(t *testing.T, release, values string) (*rendered, error) {
	t.Helper()
	root := repoRoot(t)
	// Helm logs, through the log package, that files/ links to alerts/: expected, and noise here.
	log.SetOutput(io.Discard)
	ch, err := loader.Load(filepath.Join(root, chartDir))
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	vals, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		t.Fatal(err)
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: release, Namespace: "llm", IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	out, err := engine.Render(ch, top)
	if err != nil {
		return nil, err
	}
	r := &rendered{docs: map[string][]string{}}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			r.notes = out[name]
			continue
		}
		for _, doc := range splitDocs(out[name]) {
			r.docs[filepath.Base(name)] = append(r.docs[filepath.Base(name)], doc)
			r.decode(t, name, []byte(doc))
		}
	}
	if r.configMap != nil {
		if r.slaprobeCfg, err = config.LoadBytes([]byte(r.configMap.Data["slaprobe.yml"])); err != nil {
			t.Errorf("the ConfigMap's slaprobe.yml does not load: %v\n%s", err, r.configMap.Data["slaprobe.yml"])
		}
	}
	return r, nil
}

// splitDocs splits a YAML stream into its non-empty documents.
func splitDocs(s string) []string {
	var out []string
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(s, -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			out = append(out, strings.TrimSpace(d)+"\n")
		}
	}
	return out
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// decode decodes one object strictly (unknown or duplicate fields fail) into the API type its kind names.
func (r *rendered) decode(t *testing.T, file string, doc []byte) {
	t.Helper()
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	strict := func(into any) {
		t.Helper()
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			t.Errorf("%s: %s/%s does not decode strictly: %v\n%s", file, tm.APIVersion, tm.Kind, err, doc)
		}
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		r.deployment = &appsv1.Deployment{}
		strict(r.deployment)
	case "v1 Service":
		r.service = &corev1.Service{}
		strict(r.service)
	case "v1 ConfigMap":
		r.configMap = &corev1.ConfigMap{}
		strict(r.configMap)
	case "v1 Secret":
		s := &corev1.Secret{}
		strict(s)
		r.secrets = append(r.secrets, s)
	case "networking.k8s.io/v1 NetworkPolicy":
		r.netpol = &networkingv1.NetworkPolicy{}
		strict(r.netpol)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		r.monitor = &monitoringv1.ServiceMonitor{}
		strict(r.monitor)
	case "monitoring.coreos.com/v1 PrometheusRule":
		r.rule = &monitoringv1.PrometheusRule{}
		strict(r.rule)
	default:
		t.Errorf("%s: unexpected object %s %s", file, tm.APIVersion, tm.Kind)
	}
}

func mustRender(t *testing.T, release, values string) *rendered {
	t.Helper()
	r, err := render(t, release, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for _, x := range []struct {
		name string
		nil  bool
	}{{"Deployment", r.deployment == nil}, {"Service", r.service == nil}, {"ConfigMap", r.configMap == nil}} {
		if x.nil {
			t.Fatalf("no %s rendered", x.name)
		}
	}
	return r
}

func container(t *testing.T, d *appsv1.Deployment, name string) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

// checkCommon checks what holds in every mode: the restrictive security context, probes,
// resources, the API key as a file, and that Service, ServiceMonitor and PrometheusRule fit.
func checkCommon(t *testing.T, r *rendered, withKey bool) {
	t.Helper()
	d := r.deployment
	pod := d.Spec.Template.Spec
	c := container(t, d, "slaprobe")

	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("slaprobe container: no securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("slaprobe container: runAsNonRoot is not true")
	case sc.RunAsUser == nil || *sc.RunAsUser == 0:
		t.Error("slaprobe container: runAsUser is not a non-root uid")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("slaprobe container: readOnlyRootFilesystem is not true")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("slaprobe container: allowPrivilegeEscalation is not false")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("slaprobe container: privileged")
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
		t.Errorf("slaprobe container: capabilities %+v, want drop [ALL] and no add", sc.Capabilities)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod: seccompProfile is not RuntimeDefault")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("pod: the service account token is mounted; slaprobe does not use the Kubernetes API")
	}

	var httpPort *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == "http" {
			httpPort = &c.Ports[i]
		}
	}
	if httpPort == nil || httpPort.ContainerPort != 9781 || !slices.Contains(c.Args, "--web.listen-address=:9781") {
		t.Errorf("slaprobe container: port http 9781 and --web.listen-address=:9781, got %+v %v", c.Ports, c.Args)
	}
	for _, p := range []struct {
		name, path string
		probe      *corev1.Probe
	}{{"liveness", "/-/healthy", c.LivenessProbe}, {"readiness", "/-/ready", c.ReadinessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe: want GET %s on port http, got %+v", p.name, p.path, p.probe)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("slaprobe container: resources %+v, want cpu and memory requests and a memory limit", c.Resources)
	}

	// Config from the ConfigMap; the API key a file from a Secret, never an environment variable.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
		if !m.ReadOnly && m.Name != "tmp" && m.Name != "data" {
			t.Errorf("mount %s at %s is writable", m.Name, m.MountPath)
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	if v := volumes["config"]; v.ConfigMap == nil || v.ConfigMap.Name != r.configMap.Name || mounts["config"].MountPath != "/etc/slaprobe/config" ||
		!slices.Contains(c.Args, "--config.file=/etc/slaprobe/config/slaprobe.yml") {
		t.Errorf("config volume %+v / mount %+v: want the ConfigMap %s at /etc/slaprobe/config, read by --config.file", v, mounts["config"], r.configMap.Name)
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("slaprobe container: secret %s in environment variable %s; mount it as a file", e.ValueFrom.SecretKeyRef.Name, e.Name)
		}
	}
	if withKey {
		v, m := volumes["api-key"], mounts["api-key"]
		if v.Secret == nil || m.MountPath != "/etc/slaprobe/secrets" || len(v.Secret.Items) != 1 || v.Secret.Items[0].Path != "api-key" {
			t.Fatalf("api-key volume %+v mounted %+v: want a Secret item api-key under /etc/slaprobe/secrets", v, m)
		}
		for _, tc := range r.slaprobeCfg.TargetConfigs {
			a := tc.HTTPClientConfig.Authorization
			if a == nil || a.CredentialsFile != "/etc/slaprobe/secrets/api-key" || a.Type != "Bearer" {
				t.Errorf("target %s: authorization %+v, want Bearer from /etc/slaprobe/secrets/api-key", tc.Name, a)
			}
		}
	} else if _, ok := volumes["api-key"]; ok {
		t.Error("an api-key volume without an API key")
	}

	// The Service selects the pods and forwards to the named port.
	podLabels := labels.Set(d.Spec.Template.Labels)
	if sel := labels.SelectorFromSet(r.service.Spec.Selector); r.service.Spec.Selector == nil || !sel.Matches(podLabels) {
		t.Errorf("Service selector %v does not select the pod labels %v", r.service.Spec.Selector, podLabels)
	}
	if ds, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil || !ds.Matches(podLabels) {
		t.Errorf("Deployment selector %v does not match its pod labels %v: %v", d.Spec.Selector, podLabels, err)
	}
	svcPorts := map[string]corev1.ServicePort{}
	for _, p := range r.service.Spec.Ports {
		svcPorts[p.Name] = p
	}
	if p := svcPorts["http"]; p.Port != 9781 || p.TargetPort.String() != "http" {
		t.Errorf("Service port http: %+v", p)
	}

	// The ServiceMonitor selects the Service, scrapes /metrics on http, and names the job "slaprobe".
	if r.monitor != nil {
		m := r.monitor
		sel, err := metav1.LabelSelectorAsSelector(&m.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(r.service.Labels)) {
			t.Errorf("ServiceMonitor selector %v does not select the Service (labels %v)", m.Spec.Selector, r.service.Labels)
		}
		if job := r.service.Labels[m.Spec.JobLabel]; job != "slaprobe" {
			t.Errorf("ServiceMonitor jobLabel %q gives job=%q; the rules' SlaprobeDown selects job=\"slaprobe\"", m.Spec.JobLabel, job)
		}
		if len(m.Spec.Endpoints) == 0 || m.Spec.Endpoints[0].Port != "http" || m.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v: want port http, /metrics first", m.Spec.Endpoints)
		}
		for _, e := range m.Spec.Endpoints {
			if _, ok := svcPorts[e.Port]; !ok {
				t.Errorf("ServiceMonitor endpoint port %q is not a Service port", e.Port)
			}
		}
	}
	if r.netpol != nil {
		checkNetworkPolicy(t, r)
	}
	// The PrometheusRule is alerts/slaprobe.rules.yml, group for group.
	if r.rule != nil {
		var want monitoringv1.PrometheusRuleSpec
		if err := yaml.UnmarshalStrict(readFile(t, filepath.Join(repoRoot(t), "alerts", "slaprobe.rules.yml")), &want); err != nil {
			t.Fatalf("alerts/slaprobe.rules.yml as a PrometheusRule spec: %v", err)
		}
		if len(want.Groups) == 0 || !reflect.DeepEqual(want, r.rule.Spec) {
			t.Errorf("the PrometheusRule differs from alerts/slaprobe.rules.yml (%d groups rendered, %d in the file)", len(r.rule.Spec.Groups), len(want.Groups))
		}
	}
}

// checkNetworkPolicy: the policy selects the pods and lets into port http only the peers its
// values name (the Prometheus selector first); in sidecar mode the engine's port stays open.
func checkNetworkPolicy(t *testing.T, r *rendered) {
	t.Helper()
	np := r.netpol
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || !sel.Matches(labels.Set(r.deployment.Spec.Template.Labels)) {
		t.Errorf("NetworkPolicy podSelector %v does not select the pods %v", np.Spec.PodSelector, r.deployment.Spec.Template.Labels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("NetworkPolicy policyTypes %v, want [Ingress]", np.Spec.PolicyTypes)
	}
	sidecar := len(r.deployment.Spec.Template.Spec.Containers) == 2
	httpRules, engineOpen := 0, false
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			switch p.Port.String() {
			case "http", "9781":
				httpRules++
				if len(rule.From) == 0 {
					t.Error("NetworkPolicy: port http open to every peer")
				}
				for _, f := range rule.From {
					if f.PodSelector == nil && f.IPBlock == nil {
						t.Errorf("NetworkPolicy: port http open to whole namespaces %v", f.NamespaceSelector)
					}
				}
				if len(rule.From) > 0 && (rule.From[0].PodSelector == nil || rule.From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "prometheus") {
					t.Errorf("NetworkPolicy: the first peer of port http is %+v, want the Prometheus pods", rule.From[0])
				}
			case "vllm":
				engineOpen = len(rule.From) == 0
			}
		}
	}
	if httpRules != 1 {
		t.Errorf("NetworkPolicy: %d rules for port http, want 1", httpRules)
	}
	if sidecar && !engineOpen {
		t.Error("sidecar mode: the NetworkPolicy closes the engine's port to its production traffic")
	}
}

func TestChartDeploymentMode(t *testing.T) {
	r := mustRender(t, "slaprobe", "")
	checkCommon(t, r, false)
	if r.netpol == nil {
		t.Error("no NetworkPolicy with the default values")
	}
	// The Prometheus selector from the values; the policy off renders none.
	r = mustRender(t, "slaprobe", "networkPolicy: {prometheus: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}, podSelector: {matchLabels: {app.kubernetes.io/name: prometheus, prometheus: k8s}}}}\n")
	checkCommon(t, r, false)
	if in := r.netpol.Spec.Ingress; len(in) == 0 || len(in[0].From) == 0 || in[0].From[0].NamespaceSelector == nil || in[0].From[0].PodSelector == nil ||
		in[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" || in[0].From[0].PodSelector.MatchLabels["prometheus"] != "k8s" {
		t.Errorf("networkPolicy.prometheus not applied: %+v", in)
	}
	if r = mustRender(t, "slaprobe", "networkPolicy: {enabled: false}\n"); r.netpol != nil {
		t.Error("a NetworkPolicy with networkPolicy.enabled false")
	}
	r = mustRender(t, "slaprobe", "")
	if n := len(r.deployment.Spec.Template.Spec.Containers); n != 1 {
		t.Errorf("%d containers, want slaprobe alone", n)
	}
	if r.monitor == nil || r.rule == nil {
		t.Fatal("ServiceMonitor or PrometheusRule missing with the default values")
	}
	if got := r.slaprobeCfg.TargetConfigs; len(got) != 1 || got[0].URL != "http://vllm:8000" {
		t.Errorf("targets %+v, want the default http://vllm:8000", got)
	}
	ps := r.deployment.Spec.Template.Spec.SecurityContext
	if ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Error("deployment mode: pod-level runAsNonRoot is not true")
	}
}

// A values file with several targets, an API key the chart turns into a Secret, and the operator
// objects off.
func TestChartSeveralTargets(t *testing.T) {
	values := `
targets:
  - {name: llama-70b, url: 'http://llama-70b.llm.svc:8000', scenarios: [chatbot, rag]}
  - {name: qwen-32b, url: 'http://qwen-32b.llm.svc:8000', model: Qwen/Qwen2.5-32B-Instruct}
  - {name: coder, url: 'https://coder.example.com', api: completions}
apiKey: {value: sk-test-123}
config:
  global: {jitter: 0.1, scenarios: [chatbot, agentic]}
  engine: {scrape_interval: 30s}
serviceMonitor: {enabled: false}
prometheusRule: {enabled: false}
`
	r := mustRender(t, "fleet", values)
	checkCommon(t, r, true)
	if r.monitor != nil || r.rule != nil {
		t.Error("operator objects rendered with them turned off")
	}
	var names []string
	for _, tc := range r.slaprobeCfg.TargetConfigs {
		names = append(names, tc.Name)
	}
	if !slices.Equal(names, []string{"llama-70b", "qwen-32b", "coder"}) {
		t.Errorf("targets %v", names)
	}
	if s := r.slaprobeCfg.Scenarios("qwen-32b"); len(s) != 2 || s[1].Name != "agentic" {
		t.Errorf("qwen-32b scenarios %v, want config.global.scenarios", s)
	}
	if len(r.secrets) != 1 || string(r.secrets[0].Data["api-key"]) != "sk-test-123" {
		t.Fatalf("secrets %+v, want one with api-key", r.secrets)
	}
	vol := r.deployment.Spec.Template.Spec.Volumes
	if i := slices.IndexFunc(vol, func(v corev1.Volume) bool { return v.Name == "api-key" }); i < 0 || vol[i].Secret.SecretName != r.secrets[0].Name {
		t.Error("the api-key volume does not use the chart's Secret")
	}
	if strings.Contains(strings.Join(r.docs["configmap.yaml"], ""), "sk-test-123") {
		t.Error("the API key is in the ConfigMap")
	}
	// --web.config.file from a Secret, mounted read-only.
	r = mustRender(t, "fleet", "webConfigSecret: slaprobe-web\nserviceMonitor: {endpoint: {scheme: https, basicAuth: {username: {name: scrape, key: user}, password: {name: scrape, key: pass}}}}\n")
	checkCommon(t, r, false)
	if e := r.monitor.Spec.Endpoints[0]; e.Scheme == nil || *e.Scheme != "https" || e.BasicAuth == nil || e.BasicAuth.Password.Name != "scrape" {
		t.Errorf("serviceMonitor.endpoint not applied to slaprobe's endpoint: %+v", e)
	}
	c := container(t, r.deployment, "slaprobe")
	if !slices.Contains(c.Args, "--web.config.file=/etc/slaprobe/web/web-config.yml") || !slices.ContainsFunc(r.deployment.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "slaprobe-web"
	}) {
		t.Errorf("webConfigSecret: args %v; want --web.config.file from the Secret slaprobe-web", c.Args)
	}
	// An existing Secret: no Secret rendered, the volume uses it.
	r = mustRender(t, "fleet", "apiKey: {existingSecret: vllm-key, key: token}\n")
	checkCommon(t, r, true)
	if len(r.secrets) != 0 || !slices.ContainsFunc(r.deployment.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "vllm-key" && v.Secret.Items[0].Key == "token"
	}) {
		t.Error("apiKey.existingSecret is not what the api-key volume mounts")
	}
}

func TestChartSidecarMode(t *testing.T) {
	r := mustRender(t, "qwen", "mode: sidecar\napiKey: {existingSecret: vllm-key}\nvllm: {model: Qwen/Qwen3-8B, extraArgs: [--max-model-len=32768]}\n")
	checkCommon(t, r, true)
	pod := r.deployment.Spec.Template.Spec
	if len(pod.Containers) != 2 {
		t.Fatalf("%d containers, want vllm and slaprobe", len(pod.Containers))
	}
	v := container(t, r.deployment, "vllm")
	if gpu := v.Resources.Limits[corev1.ResourceName("nvidia.com/gpu")]; gpu.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("vllm container: GPU limit %v, want 1", gpu.String())
	}
	if !strings.HasPrefix(v.Image, "vllm/vllm-openai:") || !slices.Contains(v.Args, "--max-model-len=32768") || !slices.Contains(v.Args, "--port=8000") {
		t.Errorf("vllm container: image %s args %v", v.Image, v.Args)
	}
	if i := slices.IndexFunc(v.Env, func(e corev1.EnvVar) bool { return e.Name == "VLLM_API_KEY" }); i < 0 || v.Env[i].ValueFrom.SecretKeyRef.Name != "vllm-key" {
		t.Errorf("vllm container: VLLM_API_KEY not from the key's Secret: %+v", v.Env)
	}
	if got := r.slaprobeCfg.TargetConfigs; len(got) != 1 || got[0].URL != "http://127.0.0.1:8000" {
		t.Errorf("sidecar targets %+v, want the pod's own vLLM on 127.0.0.1:8000", got)
	}
	if ps := pod.SecurityContext; ps.RunAsNonRoot != nil || ps.RunAsUser != nil {
		t.Errorf("sidecar mode: pod-level %+v would stop the vLLM image (root) from starting", ps)
	}
	if r.monitor == nil || len(r.monitor.Spec.Endpoints) != 2 || r.monitor.Spec.Endpoints[1].Port != "vllm" {
		t.Fatalf("ServiceMonitor endpoints: want slaprobe and the engine")
	}
	rl := r.monitor.Spec.Endpoints[1].RelabelConfigs
	if len(rl) != 1 || rl[0].TargetLabel != "job" || rl[0].Replacement == nil || *rl[0].Replacement != "vllm" {
		t.Errorf("the engine endpoint's relabelings %+v: want job=vllm, out of up{job=\"slaprobe\"}", rl)
	}
}

func TestChartRejectsBadValues(t *testing.T) {
	for values, want := range map[string]string{
		"mode: daemonset":                        `mode="daemonset"; expected deployment or sidecar`,
		"config: {targets: [{url: 'http://x'}]}": "config.targets: set targets at the top level",
	} {
		if _, err := render(t, "slaprobe", values); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("values %q: error %v, want %q", values, err, want)
		}
	}
}

// manifests are the plain files for `kubectl apply`, rendered from the chart: the core objects, and
// the Prometheus Operator objects apart (they need its CRDs).
var manifests = []struct {
	file, release, values string
	templates             []string
}{
	{"slaprobe.yaml", "slaprobe", "", []string{"configmap.yaml", "service.yaml", "deployment.yaml", "networkpolicy.yaml"}},
	{"slaprobe-sidecar.yaml", "vllm", "mode: sidecar\n", []string{"configmap.yaml", "service.yaml", "deployment.yaml", "networkpolicy.yaml"}},
	{"prometheus-operator.yaml", "slaprobe", "", []string{"servicemonitor.yaml", "prometheusrule.yaml"}},
}

// TestManifests checks deploy/kubernetes/*.yaml against a fresh rendering; -update rewrites them
// (`make manifests`).
func TestManifests(t *testing.T) {
	root := repoRoot(t)
	for _, m := range manifests {
		r := mustRender(t, m.release, m.values)
		var b bytes.Buffer
		fmt.Fprintf(&b, "# Rendered from the Helm chart in %s by `make manifests`: edit the chart, not this file.\n", chartDir)
		fmt.Fprintf(&b, "# helm template %s %s", m.release, chartDir)
		if m.values != "" {
			fmt.Fprintf(&b, " --set %s", strings.ReplaceAll(strings.TrimSpace(m.values), ": ", "="))
		}
		b.WriteString("\n")
		if slices.Contains(m.templates, "configmap.yaml") {
			b.WriteString("# Edit the targets in the ConfigMap, then: kubectl apply -n <namespace> -f <this file>\n")
		} else {
			b.WriteString("# Needs the Prometheus Operator's CRDs: kubectl apply -n <namespace> -f <this file>\n")
		}
		for _, tmpl := range m.templates {
			for _, doc := range r.docs[tmpl] {
				// Helm's own labels do not belong in files that Helm does not manage.
				doc = regexp.MustCompile(`(?m)^\s+(helm\.sh/chart|app\.kubernetes\.io/managed-by): .*\n`).ReplaceAllString(doc, "")
				fmt.Fprintf(&b, "---\n# Source: %s\n%s", tmpl, doc)
			}
		}
		path := filepath.Join(root, "deploy", "kubernetes", m.file)
		if *update {
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (run `make manifests`)", err)
			continue
		}
		if !bytes.Equal(got, b.Bytes()) {
			t.Errorf("%s differs from the chart's rendering: run `make manifests` and commit the result", path)
		}
		// The file itself decodes strictly too.
		fr := &rendered{}
		for _, doc := range splitDocs(string(got)) {
			fr.decode(t, m.file, []byte(doc))
		}
	}
}
