package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
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
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/mcpgw/mcpgw/internal/config"
)

// strictDecoder decodes manifests into the Kubernetes API types the way
// the API server's strict field validation does: an unknown or duplicate
// field, a wrong type or an unregistered kind is an error. The custom
// resources are decoded into their projects' own Go types
// (prometheus-operator's monitoring/v1, Gateway API's v1).
func strictDecoder(t *testing.T) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
		autoscalingv2.AddToScheme, networkingv1.AddToScheme,
		monitoringv1.AddToScheme, gatewayv1.Install,
	} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// object is one decoded manifest and where it came from.
type object struct {
	source string
	obj    runtime.Object
}

func (o object) kind() string { return o.obj.GetObjectKind().GroupVersionKind().Kind }

func (o object) name() string {
	m, err := meta.Accessor(o.obj)
	if err != nil {
		return ""
	}
	return m.GetName()
}

// kustomization is the part of kustomize's Kustomization the manifests
// use; decoded strictly, so a field added to the file must be added here.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// decodeManifests decodes every document of a multi-document YAML stream.
// Documents holding only comments (Helm's "# Source:" separators) are
// skipped; Kustomizations are returned apart.
func decodeManifests(t *testing.T, dec runtime.Decoder, source string, data []byte) ([]object, []kustomization) {
	t.Helper()
	var objs []object
	var kusts []kustomization
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, kusts
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", source, i, err)
		}
		j, err := sigsyaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: document %d: %v", source, i, err)
		}
		if string(bytes.TrimSpace(j)) == "null" {
			continue
		}
		where := fmt.Sprintf("%s (document %d)", source, i)
		if s := helmSource(doc); s != "" {
			where = s
		}
		var tm metav1.TypeMeta
		_ = sigsyaml.Unmarshal(doc, &tm)
		if tm.Kind == "Kustomization" {
			var k kustomization
			if err := sigsyaml.UnmarshalStrict(doc, &k); err != nil {
				t.Errorf("%s: %v", where, err)
			}
			kusts = append(kusts, k)
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			t.Errorf("%s: not a valid %s %s: %v", where, tm.APIVersion, tm.Kind, err)
			continue
		}
		objs = append(objs, object{source: where, obj: obj})
	}
}

// helmSource returns the template a helm template document came from.
func helmSource(doc []byte) string {
	for _, line := range strings.Split(string(doc), "\n") {
		if s, ok := strings.CutPrefix(line, "# Source: "); ok {
			return s
		}
	}
	return ""
}

// bundle is the set of objects applied together (a rendered chart, or a
// directory of manifests), with cross-object checks.
type bundle struct {
	t    *testing.T
	objs []object
	// external names objects the bundle refers to but does not hold
	// (an existingSecret, a user's ConfigMap), by "Kind/name".
	external map[string]bool
}

func all[T runtime.Object](b *bundle) []T {
	var out []T
	for _, o := range b.objs {
		if v, ok := o.obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func (b *bundle) has(kind, name string) bool {
	if b.external[kind+"/"+name] {
		return true
	}
	for _, o := range b.objs {
		if o.kind() == kind && o.name() == name {
			return true
		}
	}
	return false
}

// keysOf returns the data keys of a ConfigMap or Secret the bundle holds.
func (b *bundle) keysOf(kind, name string) (map[string]bool, bool) {
	keys := map[string]bool{}
	for _, cm := range all[*corev1.ConfigMap](b) {
		if kind == "ConfigMap" && cm.Name == name {
			for k := range cm.Data {
				keys[k] = true
			}
			return keys, true
		}
	}
	for _, s := range all[*corev1.Secret](b) {
		if kind == "Secret" && s.Name == name {
			for k := range s.Data {
				keys[k] = true
			}
			for k := range s.StringData {
				keys[k] = true
			}
			return keys, true
		}
	}
	return nil, false
}

func (b *bundle) kinds() []string {
	var out []string
	for _, o := range b.objs {
		out = append(out, o.kind())
	}
	slices.Sort(out)
	return out
}

// mcpgwPod is where mcpgw runs in a workload: its container (a container or
// a native sidecar named mcpgw) and the pod around it.
type mcpgwPod struct {
	owner     string
	podLabels map[string]string
	spec      *corev1.PodSpec
	c         *corev1.Container
}

func (b *bundle) mcpgwPods() []mcpgwPod {
	var out []mcpgwPod
	for _, d := range all[*appsv1.Deployment](b) {
		spec := &d.Spec.Template.Spec
		for _, list := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
			for i := range list {
				if list[i].Name == "mcpgw" {
					out = append(out, mcpgwPod{owner: "Deployment " + d.Name, podLabels: d.Spec.Template.Labels, spec: spec, c: &list[i]})
				}
			}
		}
	}
	return out
}

// selects reports whether a label selector picks the labels.
func selects(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Errorf("selector %v: %v", sel, err)
		return false
	}
	return !s.Empty() && s.Matches(labels.Set(l))
}

// containerPort resolves a named or numbered port of a container.
func containerPort(c *corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

func listenPort(addr string) int32 {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// fileKeys returns every *_file value of a loaded config (key_file,
// client_secret_file, lock_file...) by its path: the files the pod must have.
func fileKeys(v reflect.Value, path string, out map[string]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			fileKeys(v.Elem(), path, out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if strings.HasSuffix(key, "_file") && f.Type.Kind() == reflect.String {
				if s := v.Field(i).String(); s != "" {
					out[path+"."+key] = s
				}
				continue
			}
			fileKeys(v.Field(i), path+"."+key, out)
		}
	case reflect.Slice:
		for i := range v.Len() {
			fileKeys(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			fileKeys(v.MapIndex(k), path+"."+fmt.Sprint(k), out)
		}
	}
}

// check runs the checks that hold for every bundle and returns the loaded
// mcpgw config of each mcpgw container, by owner.
func (b *bundle) check() map[string]*config.Config {
	t := b.t
	t.Helper()
	for _, o := range b.objs {
		m, _ := meta.Accessor(o.obj)
		for _, msg := range validation.IsDNS1123Subdomain(m.GetName()) {
			t.Errorf("%s: name %q: %s", o.source, m.GetName(), msg)
		}
		for k, v := range m.GetLabels() {
			for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
				t.Errorf("%s: label %s=%s: %s", o.source, k, v, msg)
			}
		}
	}
	for _, s := range all[*corev1.Service](b) {
		for _, msg := range validation.IsDNS1035Label(s.Name) {
			t.Errorf("Service %s: %s", s.Name, msg)
		}
	}
	loaded := map[string]*config.Config{}
	pods := b.mcpgwPods()
	if len(pods) == 0 {
		t.Error("no mcpgw container in any Deployment")
	}
	for _, p := range pods {
		if cfg := b.checkPod(p); cfg != nil {
			loaded[p.owner] = cfg
		}
	}
	for _, d := range all[*appsv1.Deployment](b) {
		if !selects(t, d.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("Deployment %s: its selector does not pick its own pods' labels", d.Name)
		}
	}
	// Every Service reaches pods of the bundle, on ports they declare.
	for _, s := range all[*corev1.Service](b) {
		var target *mcpgwPod
		for i, p := range pods {
			if selects(t, &metav1.LabelSelector{MatchLabels: s.Spec.Selector}, p.podLabels) {
				target = &pods[i]
			}
		}
		if target == nil {
			t.Errorf("Service %s: its selector %v picks no mcpgw pod", s.Name, s.Spec.Selector)
			continue
		}
		for _, sp := range s.Spec.Ports {
			if _, ok := containerPort(target.c, sp.TargetPort); !ok {
				t.Errorf("Service %s: port %s targets %s, which %s's mcpgw container does not declare", s.Name, sp.Name, sp.TargetPort.String(), target.owner)
			}
		}
	}
	for _, pdb := range all[*policyv1.PodDisruptionBudget](b) {
		if !slices.ContainsFunc(pods, func(p mcpgwPod) bool { return selects(t, pdb.Spec.Selector, p.podLabels) }) {
			t.Errorf("PodDisruptionBudget %s selects no mcpgw pod", pdb.Name)
		}
	}
	return loaded
}

// checkPod checks one mcpgw container: probes on declared ports, mounts of
// declared volumes that the bundle holds, a config that loads with the
// container's own environment, listen ports that match the declared ports,
// and every file the config names under a mount.
func (b *bundle) checkPod(p mcpgwPod) *config.Config {
	t := b.t
	t.Helper()
	c := p.c
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: the mcpgw container must have a read-only root and no privilege escalation", p.owner)
	}
	probed := map[int32]bool{}
	for name, pr := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		if pr == nil || pr.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", p.owner, name)
			continue
		}
		port, ok := containerPort(c, pr.HTTPGet.Port)
		if !ok {
			t.Errorf("%s: the %s probe's port %s is not a declared container port", p.owner, name, pr.HTTPGet.Port.String())
		}
		probed[port] = true
		if want := map[string]string{"liveness": "/healthz", "readiness": "/readyz"}[name]; want != "" && pr.HTTPGet.Path != want {
			t.Errorf("%s: the %s probe asks %s, want %s", p.owner, name, pr.HTTPGet.Path, want)
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range p.spec.Volumes {
		volumes[v.Name] = v
		switch {
		case v.ConfigMap != nil && (v.ConfigMap.Optional == nil || !*v.ConfigMap.Optional):
			if !b.has("ConfigMap", v.ConfigMap.Name) {
				t.Errorf("%s: volume %s needs ConfigMap %s, which is not in the bundle", p.owner, v.Name, v.ConfigMap.Name)
			}
		case v.Secret != nil && (v.Secret.Optional == nil || !*v.Secret.Optional):
			if !b.has("Secret", v.Secret.SecretName) {
				t.Errorf("%s: volume %s needs Secret %s, which is not in the bundle", p.owner, v.Name, v.Secret.SecretName)
			}
		}
	}
	var configMap, configKey string
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Errorf("%s: volumeMount %s names no volume", p.owner, m.Name)
			continue
		}
		if v.ConfigMap != nil && m.MountPath == "/etc/mcpgw" {
			configMap, configKey = v.ConfigMap.Name, "config.yaml"
		}
	}
	if !slices.Contains(c.Args, "--config=/etc/mcpgw/config.yaml") || configMap == "" {
		t.Errorf("%s: mcpgw must run with --config=/etc/mcpgw/config.yaml from a ConfigMap mounted at /etc/mcpgw", p.owner)
		return nil
	}
	var data string
	for _, cm := range all[*corev1.ConfigMap](b) {
		if cm.Name == configMap {
			data = cm.Data[configKey]
		}
	}
	if data == "" {
		t.Errorf("%s: ConfigMap %s has no %s", p.owner, configMap, configKey)
		return nil
	}
	// ${VAR} expands only to what the container's env sets.
	envSet := map[string]bool{}
	for _, e := range c.Env {
		envSet[e.Name] = true
	}
	lookup := func(name string) (string, bool) {
		if envSet[name] {
			return "value-of-" + strings.ToLower(name), true
		}
		return "", false
	}
	cfg, err := config.Parse(p.owner+" ConfigMap "+configMap, []byte(data), lookup)
	if err != nil {
		t.Errorf("the config does not load with the container's environment (%v):\n%v", slices.Sorted(maps.Keys(envSet)), err)
		return nil
	}
	if port, ok := containerPort(c, intstr.FromString("mcp")); ok && listenPort(cfg.Listen) != port {
		t.Errorf("%s: config listen %s, but the mcp container port is %d", p.owner, cfg.Listen, port)
	}
	if cfg.Admin == nil || !probed[listenPort(cfg.Admin.Listen)] {
		t.Errorf("%s: the probes ask ports %v, but the config's admin listener is %v", p.owner, slices.Sorted(maps.Keys(probed)), cfg.Admin)
	}
	files := map[string]string{}
	fileKeys(reflect.ValueOf(cfg), "config", files)
	for key, path := range files {
		var mount *corev1.VolumeMount
		for i, m := range c.VolumeMounts {
			if strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") && (mount == nil || len(m.MountPath) > len(mount.MountPath)) {
				mount = &c.VolumeMounts[i]
			}
		}
		if mount == nil {
			t.Errorf("%s: %s is %s, which no volumeMount provides", p.owner, key, path)
			continue
		}
		// A file from a ConfigMap or Secret must be one of its items, or
		// of its keys when the bundle holds it.
		file := strings.TrimPrefix(path, strings.TrimSuffix(mount.MountPath, "/")+"/")
		v := volumes[mount.Name]
		var kind, name string
		var items []corev1.KeyToPath
		switch {
		case v.ConfigMap != nil:
			kind, name, items = "ConfigMap", v.ConfigMap.Name, v.ConfigMap.Items
		case v.Secret != nil:
			kind, name, items = "Secret", v.Secret.SecretName, v.Secret.Items
		default:
			continue
		}
		if items != nil {
			if !slices.ContainsFunc(items, func(k corev1.KeyToPath) bool { return k.Path == file }) {
				t.Errorf("%s: %s is %s, but volume %s (%s %s) projects only %v there", p.owner, key, path, mount.Name, kind, name, items)
			}
			continue
		}
		if keys, ok := b.keysOf(kind, name); ok && !keys[file] {
			t.Errorf("%s: %s is %s, but %s %s has no key %q", p.owner, key, path, kind, name, file)
		}
	}
	return cfg
}
