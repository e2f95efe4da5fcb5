package deploy_test

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/mcpgw/mcpgw/internal/config"
)

// renderedEnv names the directory where .ci/check-helm.sh leaves the output
// of `helm template`, one file per values set.
const renderedEnv = "MCPGW_HELM_RENDERED"

// The values sets .ci/check-helm.sh renders, and what each must produce.
var helmSets = []struct {
	name  string
	kinds []string
	check func(t *testing.T, b *bundle, configs map[string]*config.Config)
}{
	{
		name:  "default",
		kinds: []string{"ConfigMap", "Deployment", "Pod", "PodDisruptionBudget", "Secret", "Service", "Service", "ServiceAccount"},
		check: func(t *testing.T, b *bundle, configs map[string]*config.Config) {
			d := all[*appsv1.Deployment](b)[0]
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
				t.Errorf("replicas %v, want 2", d.Spec.Replicas)
			}
			c := d.Spec.Template.Spec.Containers[0]
			if c.Image != "ghcr.io/mcpgw/mcpgw:0.1.0" {
				t.Errorf("image %s, want the appVersion tag", c.Image)
			}
			for _, want := range []string{"--shutdown-delay=5s", "--drain-timeout=30s", "--log-format=json"} {
				if !slices.Contains(c.Args, want) {
					t.Errorf("args %v lack %s", c.Args, want)
				}
			}
			if len(c.Env) != 0 || len(c.EnvFrom) != 0 {
				t.Errorf("env %v / envFrom %v rendered without values", c.Env, c.EnvFrom)
			}
		},
	},
	{
		name: "full",
		kinds: []string{"ConfigMap", "Deployment", "HTTPRoute", "HorizontalPodAutoscaler", "Ingress", "NetworkPolicy", "Pod",
			"PodDisruptionBudget", "PrometheusRule", "Secret", "Service", "Service", "ServiceAccount", "ServiceMonitor"},
		check: func(t *testing.T, b *bundle, configs map[string]*config.Config) {
			d := all[*appsv1.Deployment](b)[0]
			if d.Spec.Replicas != nil {
				t.Errorf("replicas %d set although the HPA scales the Deployment", *d.Spec.Replicas)
			}
			c := d.Spec.Template.Spec.Containers[0]
			if !strings.Contains(c.Image, "@sha256:") {
				t.Errorf("image %s does not use image.digest", c.Image)
			}
			var fromSecret []string
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					fromSecret = append(fromSecret, e.Name+"="+e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key)
				}
			}
			if want := []string{"GITHUB_TOKEN=github-mcp/token", "OPS_API_KEY=mcpgw-keys/ops"}; !slices.Equal(fromSecret, want) {
				t.Errorf("env from Secrets %v, want %v", fromSecret, want)
			}
			if len(c.EnvFrom) != 1 || !slices.Contains(c.Args, "--watch") {
				t.Errorf("envFrom %v or extraArgs %v not rendered", c.EnvFrom, c.Args)
			}
			cfg := configs["Deployment "+d.Name]
			if cfg == nil || cfg.Upstreams["demo"] != nil || cfg.Upstreams["github"].Headers["Authorization"] != "Bearer value-of-github_token" {
				t.Errorf("the config did not merge as Helm does (demo: null removes the default upstream) or ${GITHUB_TOKEN} did not expand from the Secret env: %+v", cfg)
			}
		},
	},
	{
		name:  "existing-secret",
		kinds: []string{"ConfigMap", "Deployment", "Pod", "PodDisruptionBudget", "Service", "Service", "ServiceAccount"},
		check: func(t *testing.T, b *bundle, configs map[string]*config.Config) {
			d := all[*appsv1.Deployment](b)[0]
			found := false
			for _, v := range d.Spec.Template.Spec.Volumes {
				found = found || v.Secret != nil && v.Secret.SecretName == "mine"
			}
			if !found {
				t.Error("the Deployment does not mount existingSecret")
			}
		},
	},
	{
		name:  "fleet",
		kinds: []string{"ConfigMap", "Deployment", "Pod", "PodDisruptionBudget", "Secret", "Secret", "Service", "Service", "ServiceAccount"},
		check: func(t *testing.T, b *bundle, configs map[string]*config.Config) {
			d := all[*appsv1.Deployment](b)[0]
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
				t.Errorf("replicas %v, want 3 (redis.replicaCount) for a fleet", d.Spec.Replicas)
			}
			cfg := configs["Deployment "+d.Name]
			if cfg == nil || cfg.Sessions == nil || cfg.Sessions.Redis == nil || cfg.Sessions.Redis.Addr != "redis.mcp.svc.cluster.local:6379" ||
				cfg.Sessions.Redis.PasswordFile != "/etc/mcpgw/redis/password" || cfg.Sessions.KeyFile != "/etc/mcpgw/session-keys/keys" {
				t.Errorf("the fleet's sessions config: %+v", cfg)
			}
			for _, svc := range all[*corev1.Service](b) {
				if svc.Spec.Ports[0].Name == "mcp" && svc.Spec.SessionAffinity != corev1.ServiceAffinityNone {
					t.Errorf("Service %s keeps sessionAffinity %s: a fleet needs none", svc.Name, svc.Spec.SessionAffinity)
				}
			}
			var keys *corev1.Secret
			for _, s := range all[*corev1.Secret](b) {
				if strings.HasSuffix(s.Name, "-session-keys") {
					keys = s
				}
			}
			if keys == nil || !strings.Contains(keys.StringData["keys"], "q5x2Wb7y") {
				t.Errorf("the session key Secret: %+v", keys)
			}
		},
	},
}

// TestHelmRendered checks the chart as real Helm renders it.
// .ci/check-helm.sh runs helm lint --strict and helm template for each of
// helmSets into $MCPGW_HELM_RENDERED/<name>.yaml, then this test. Every
// manifest must decode strictly into its Kubernetes API type (custom
// resources into their operators' Go types); the objects must fit together
// (selectors, ports, volumes, the ServiceAccount); the ConfigMap's config
// must load with mcpgw's loader using only the Deployment's environment,
// and name only files the pod mounts.
func TestHelmRendered(t *testing.T) {
	dir := os.Getenv(renderedEnv)
	if dir == "" {
		t.Skip(renderedEnv + " is not set: .ci/check-helm.sh renders the chart with helm and runs this test")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	var want []string
	for _, s := range helmSets {
		want = append(want, s.name)
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("%s holds renders %v, want %v (keep .ci/check-helm.sh and helmSets in step)", dir, names, want)
	}
	dec := strictDecoder(t)
	for _, set := range helmSets {
		t.Run(set.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, set.name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			objs, _ := decodeManifests(t, dec, set.name, data)
			b := &bundle{t: t, objs: objs, external: map[string]bool{"Secret/mine": true}}
			if got := b.kinds(); !slices.Equal(got, set.kinds) {
				t.Fatalf("rendered kinds %v, want %v", got, set.kinds)
			}
			// The full set mounts Secrets and a ConfigMap made outside the chart.
			for _, ext := range []string{"Secret/search-oauth", "Secret/session-keys", "ConfigMap/mcpgw-pins", "Secret/redis-auth"} {
				b.external[ext] = true
			}
			configs := b.check()
			checkChartObjects(t, b, configs)
			set.check(t, b, configs)
		})
	}
}

// checkChartObjects checks what the chart adds around the Deployment.
func checkChartObjects(t *testing.T, b *bundle, configs map[string]*config.Config) {
	t.Helper()
	d := all[*appsv1.Deployment](b)[0]
	pod := d.Spec.Template
	services := map[string]*corev1.Service{}
	var admin, mcp *corev1.Service
	for _, s := range all[*corev1.Service](b) {
		services[s.Name] = s
		switch s.Labels["app.kubernetes.io/component"] {
		case "admin":
			admin = s
		case "mcp":
			mcp = s
		}
	}
	if admin == nil || mcp == nil || admin.Spec.Ports[0].TargetPort.StrVal != "admin" || mcp.Spec.Ports[0].TargetPort.StrVal != "mcp" {
		t.Fatalf("want an MCP Service (component mcp, port mcp) and an admin Service (component admin, port admin); have %v", slices.Sorted(maps.Keys(services)))
	}

	for _, sa := range all[*corev1.ServiceAccount](b) {
		if pod.Spec.ServiceAccountName != sa.Name {
			t.Errorf("pods run as ServiceAccount %q, the chart makes %q", pod.Spec.ServiceAccountName, sa.Name)
		}
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Errorf("ServiceAccount %s mounts its token; mcpgw never calls the API", sa.Name)
		}
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Error("the pod mounts a ServiceAccount token")
	}

	// helm test: a hook pod asking the admin Service's /readyz with the same
	// image, which no Service or PDB counts as a gateway pod.
	var testPod *corev1.Pod
	for _, p := range all[*corev1.Pod](b) {
		testPod = p
	}
	if testPod == nil || testPod.Annotations["helm.sh/hook"] != "test" || testPod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Fatalf("no helm test hook pod (helm.sh/hook: test, restartPolicy Never): %v", testPod)
	}
	wantArgs := []string{"healthcheck", "--url=http://" + admin.Name + ":" + strconv.Itoa(int(admin.Spec.Ports[0].Port)) + "/readyz", "--timeout=10s"}
	// The admin listener refuses Host names it does not know (DNS
	// rebinding): the chart must let the test pod name the Service.
	if cfg := configs["Deployment "+d.Name]; cfg == nil || cfg.Admin == nil || !slices.Contains(cfg.Admin.AllowedHosts, admin.Name) {
		t.Errorf("config.admin.allowed_hosts lacks %s, the name the helm test pod asks for", admin.Name)
	}
	if !slices.Equal(testPod.Spec.Containers[0].Args, wantArgs) || testPod.Spec.Containers[0].Image != pod.Spec.Containers[0].Image {
		t.Errorf("helm test runs %s %v, want %s %v", testPod.Spec.Containers[0].Image, testPod.Spec.Containers[0].Args, pod.Spec.Containers[0].Image, wantArgs)
	}
	for _, s := range services {
		if selects(t, &metav1.LabelSelector{MatchLabels: s.Spec.Selector}, testPod.Labels) {
			t.Errorf("Service %s selects the helm test pod", s.Name)
		}
	}

	for _, h := range all[*autoscalingv2.HorizontalPodAutoscaler](b) {
		if ref := h.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name || ref.APIVersion != "apps/v1" {
			t.Errorf("HPA scales %+v, not Deployment %s", ref, d.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas > h.Spec.MaxReplicas || len(h.Spec.Metrics) == 0 {
			t.Errorf("HPA min %v max %d metrics %d", h.Spec.MinReplicas, h.Spec.MaxReplicas, len(h.Spec.Metrics))
		}
	}
	for _, ing := range all[*networkingv1.Ingress](b) {
		for _, r := range ing.Spec.Rules {
			for _, p := range r.HTTP.Paths {
				if be := p.Backend.Service; be == nil || be.Name != mcp.Name || be.Port.Name != "mcp" {
					t.Errorf("Ingress path %s goes to %+v, not the MCP Service's mcp port", p.Path, p.Backend)
				}
			}
		}
	}
	for _, r := range all[*gatewayv1.HTTPRoute](b) {
		if len(r.Spec.ParentRefs) == 0 {
			t.Error("HTTPRoute attaches to no Gateway")
		}
		for _, rule := range r.Spec.Rules {
			for _, be := range rule.BackendRefs {
				if string(be.Name) != mcp.Name || be.Port == nil || int32(*be.Port) != mcp.Spec.Ports[0].Port {
					t.Errorf("HTTPRoute goes to %s:%v, not the MCP Service %s:%d", be.Name, be.Port, mcp.Name, mcp.Spec.Ports[0].Port)
				}
			}
		}
	}
	for _, np := range all[*networkingv1.NetworkPolicy](b) {
		if !selects(t, &np.Spec.PodSelector, pod.Labels) {
			t.Errorf("NetworkPolicy %s does not select the gateway pods", np.Name)
		}
		testAllowed := false
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if _, ok := containerPort(&pod.Spec.Containers[0], *p.Port); !ok {
					t.Errorf("NetworkPolicy %s opens port %s, which the pod does not declare", np.Name, p.Port.String())
				}
				if p.Port.StrVal == "admin" {
					for _, from := range rule.From {
						testAllowed = testAllowed || from.PodSelector != nil && selects(t, from.PodSelector, testPod.Labels)
					}
				}
			}
		}
		if !testAllowed {
			t.Errorf("NetworkPolicy %s keeps the helm test pod from the admin port", np.Name)
		}
	}
	for _, sm := range all[*monitoringv1.ServiceMonitor](b) {
		if !selects(t, &sm.Spec.Selector, admin.Labels) || selects(t, &sm.Spec.Selector, mcp.Labels) {
			t.Errorf("ServiceMonitor %s must select the admin Service only", sm.Name)
		}
		for _, ep := range sm.Spec.Endpoints {
			if ep.Port != admin.Spec.Ports[0].Name || ep.Path != "/metrics" {
				t.Errorf("ServiceMonitor endpoint %s%s, want port %s path /metrics", ep.Port, ep.Path, admin.Spec.Ports[0].Name)
			}
		}
		// The alert rules select job=~"mcpgw.*".
		if job := admin.Labels[sm.Spec.JobLabel]; !strings.HasPrefix(job, "mcpgw") {
			t.Errorf("ServiceMonitor gives job %q (label %q of the admin Service); the alerts expect mcpgw", job, sm.Spec.JobLabel)
		}
	}
	for _, pr := range all[*monitoringv1.PrometheusRule](b) {
		data, err := os.ReadFile(filepath.Join("prometheus", "alerts.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var want monitoringv1.PrometheusRuleSpec
		if err := sigsyaml.UnmarshalStrict(data, &want); err != nil {
			t.Fatalf("prometheus/alerts.yaml is not a valid PrometheusRule spec: %v", err)
		}
		if !reflect.DeepEqual(pr.Spec, want) {
			t.Errorf("PrometheusRule %s differs from prometheus/alerts.yaml (the chart must render that file as it is)", pr.Name)
		}
		if len(want.Groups) == 0 || len(want.Groups[0].Rules) < 5 {
			t.Errorf("prometheus/alerts.yaml has only %d groups", len(want.Groups))
		}
	}
}
