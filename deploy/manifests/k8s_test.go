package manifests

import (
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// overlay is what a kustomization under k8s/ must render to.
type overlay struct {
	dir       string
	namespace string // "" for the base
	// counts: objects per kind, exactly.
	counts map[string]int
	// devMode is AUTH_DEV_MODE in the ConfigMap.
	devMode string
	// generatedSecret: the overlay generates waitingroom-auth itself (dev);
	// otherwise the operator creates it and no Secret is rendered.
	generatedSecret bool
}

var baseCounts = map[string]int{
	"ConfigMap":               1,
	"Deployment":              4,
	"Service":                 3, // not the dispatcher: it has no API
	"PodDisruptionBudget":     4,
	"HorizontalPodAutoscaler": 3,
	"Ingress":                 2,
	"NetworkPolicy":           3,
	"PrometheusRule":          1, // alerts and SLOs: rules_test.go checks its rules
}

func plus(m map[string]int, kinds ...string) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = v
	}
	for _, k := range kinds {
		out[k]++
	}
	return out
}

var overlays = []overlay{
	{dir: "base", counts: baseCounts, devMode: "false"},
	{dir: "overlays/dev", namespace: "waitingroom-dev", counts: plus(baseCounts, "Namespace", "Secret"), devMode: "true", generatedSecret: true},
	{dir: "overlays/prod", namespace: "waitingroom", counts: plus(baseCounts, "Namespace"), devMode: "false"},
}

const (
	partOf      = "app.kubernetes.io/part-of"
	nameLabel   = "app.kubernetes.io/name"
	authSecret  = "waitingroom-auth"
	authKey     = "jwt-secret"
	configName  = "waitingroom-config"
	nonrootUID  = 65532
	sseIngress  = "nginx.ingress.kubernetes.io/proxy-buffering"
	ingressNS   = "ingress-nginx"
	monitoringN = "monitoring"
)

// TestStrictDecoding shows the decoder refuses what the API does not know,
// so the checks below stand on real fields.
func TestStrictDecoding(t *testing.T) {
	var d appsv1.Deployment
	for _, bad := range []string{
		"spec:\n  replica: 2\n",                 // unknown
		"spec:\n  Replicas: 2\n",                // case-insensitive match only
		"spec:\n  replicas: 2\n  replicas: 3\n", // duplicate
	} {
		if err := decodeStrict([]byte("apiVersion: apps/v1\nkind: Deployment\n"+bad), &d); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
	if err := decodeStrict([]byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  replicas: 2\n"), &d); err != nil || *d.Spec.Replicas != 2 {
		t.Fatalf("a valid Deployment was refused: %v", err)
	}
}

func TestKustomizations(t *testing.T) {
	for _, o := range overlays {
		t.Run(o.dir, func(t *testing.T) {
			r := render(t, o.dir)
			checkCounts(t, r, o)
			checkNamespaces(t, r, o)
			checkConfig(t, r, o)
			for _, s := range services {
				d := r.deployments[s.name]
				if d == nil {
					t.Errorf("no Deployment %s", s.name)
					continue
				}
				checkDeployment(t, r, o, s, d)
			}
			checkServices(t, r)
			checkPDBs(t, r)
			checkHPAs(t, r)
			checkIngress(t, r)
			checkNetworkPolicies(t, r)
		})
	}
}

func checkCounts(t *testing.T, r *rendered, o overlay) {
	t.Helper()
	for _, kind := range sortedKeys(kinds) {
		if got, want := r.counts[kind], o.counts[kind]; got != want {
			t.Errorf("%d %s objects, want %d", got, kind, want)
		}
	}
}

func checkNamespaces(t *testing.T, r *rendered, o overlay) {
	t.Helper()
	if o.namespace == "" {
		return
	}
	ns := r.namespaces[o.namespace]
	if ns == nil {
		t.Fatalf("no Namespace %s", o.namespace)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("Namespace %s does not enforce the restricted Pod Security Standard", o.namespace)
	}
	for _, id := range sortedKeys(r.namespaceOf) {
		if strings.HasPrefix(id, "Namespace/") {
			continue
		}
		if got := r.namespaceOf[id]; got != o.namespace {
			t.Errorf("%s is in namespace %q, want %q", id, got, o.namespace)
		}
	}
}

// theConfigMap is the generated waitingroom-config (name with hash suffix).
func theConfigMap(t *testing.T, r *rendered) *corev1.ConfigMap {
	t.Helper()
	var found *corev1.ConfigMap
	for name, cm := range r.configMaps {
		if strings.HasPrefix(name, configName+"-") || name == configName {
			if found != nil {
				t.Fatalf("two ConfigMaps named %s*", configName)
			}
			found = cm
		}
	}
	if found == nil {
		t.Fatalf("no ConfigMap %s", configName)
	}
	return found
}

func checkConfig(t *testing.T, r *rendered, o overlay) {
	t.Helper()
	cm := theConfigMap(t, r)
	for _, k := range sortedKeys(cm.Data) {
		if !envNameKnown(t, k) {
			t.Errorf("ConfigMap key %s is not an environment variable any service reads", k)
		}
	}
	for _, k := range []string{"REDIS_URL", "AMQP_URL", "DATABASE_URL", "AUTH_DEV_MODE", "ORDER_FAILED_QUEUE", "ORDER_FAILED_DELIVERY_LIMIT"} {
		if cm.Data[k] == "" {
			t.Errorf("ConfigMap has no %s", k)
		}
	}
	if got := cm.Data["AUTH_DEV_MODE"]; got != o.devMode {
		t.Errorf("AUTH_DEV_MODE = %q, want %q", got, o.devMode)
	}
	if o.namespace != "" {
		proxies := strings.Split(cm.Data["TRUSTED_PROXIES"], ",")
		for _, p := range proxies {
			if _, _, err := net.ParseCIDR(strings.TrimSpace(p)); err != nil {
				t.Errorf("TRUSTED_PROXIES entry %q is not a CIDR: %v", p, err)
			}
		}
		// The page's view of the services and the CORS list must agree.
		cors := strings.Split(cm.Data["CORS_ALLOWED_ORIGINS"], ",")
		for _, k := range []string{"ORDER_SERVICE_PUBLIC_URL", "NOTIFICATION_SERVICE_PUBLIC_URL"} {
			u, err := url.Parse(cm.Data[k])
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				t.Errorf("%s = %q is not an absolute http(s) URL", k, cm.Data[k])
				continue
			}
			if !slices.Contains(cors, u.Scheme+"://"+u.Host) {
				t.Errorf("%s origin %s is not in CORS_ALLOWED_ORIGINS %q (the page is served from the same host)", k, u.Scheme+"://"+u.Host, cors)
			}
		}
	}
	// The JWT secret: generated in dev, created by the operator elsewhere.
	var generated []string
	for name := range r.secrets {
		if strings.HasPrefix(name, authSecret) {
			generated = append(generated, name)
		}
	}
	switch {
	case o.generatedSecret && len(generated) != 1:
		t.Errorf("want one generated Secret %s*, found %q", authSecret, generated)
	case !o.generatedSecret && len(r.secrets) != 0:
		t.Errorf("Secrets rendered %q: the operator creates %s, it must not be in these manifests", sortedKeys(r.secrets), authSecret)
	}
	for _, name := range generated {
		s := r.secrets[name]
		v := s.Data[authKey]
		if v == nil {
			v = []byte(s.StringData[authKey])
		}
		if len(v) < 32 {
			t.Errorf("Secret %s: %s is %d bytes, the services want at least 32", name, authKey, len(v))
		}
		if !strings.Contains(string(v), "dev") {
			t.Errorf("Secret %s: the generated key must be obviously a dev one", name)
		}
	}
}

func envValue(c *corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

func containerPort(c *corev1.Container, port intstr.IntOrString) (int32, bool) {
	for _, p := range c.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

func checkDeployment(t *testing.T, r *rendered, o overlay, s service, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template
	for _, l := range []map[string]string{d.Labels, pod.Labels} {
		if l[nameLabel] != s.name || l[partOf] != "waitingroom" {
			t.Errorf("%s: labels %v want %s=%s and %s=waitingroom", s.name, l, nameLabel, s.name, partOf)
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("%s: selector %v does not match its pod labels %v (%v)", s.name, d.Spec.Selector, pod.Labels, err)
	}

	// Replicas: the HPA owns the count of the scaled ones; two dispatchers.
	switch {
	case s.hpa && d.Spec.Replicas != nil:
		t.Errorf("%s: replicas %d set, but an HPA scales it (apply would reset the count)", s.name, *d.Spec.Replicas)
	case !s.hpa && (d.Spec.Replicas == nil || *d.Spec.Replicas != 2):
		t.Errorf("%s: want replicas 2 (one leads each queue, one stands by), got %s", s.name, int32p(d.Spec.Replicas))
	}

	ann := pod.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(s.opsPort) || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("%s: prometheus annotations %v, want scrape true, the ops port %d, path /metrics", s.name, ann, s.opsPort)
	}

	ps := pod.Spec
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("%s: the service account token is mounted; the services never call the API server", s.name)
	}
	if len(ps.Containers) != 1 || len(ps.InitContainers) != 0 {
		t.Fatalf("%s: want exactly one container, got %d (+%d init)", s.name, len(ps.Containers), len(ps.InitContainers))
	}
	c := &ps.Containers[0]
	if c.Name != s.name {
		t.Errorf("%s: container named %q", s.name, c.Name)
	}

	// Image: a tag in the overlays, never latest.
	if o.namespace != "" {
		i := strings.LastIndex(c.Image, ":")
		if i < 0 || strings.Contains(c.Image[i:], "/") || c.Image[i+1:] == "latest" || !strings.Contains(c.Image, s.name) {
			t.Errorf("%s: image %q must name the service and carry a pinned tag", s.name, c.Image)
		}
	}

	// The ports: http, the API, where HTTP_ADDR listens (none for the
	// dispatcher), and ops, the ops listener, where OPS_ADDR listens.
	type listener struct {
		port int
		env  string
	}
	wantPorts := map[string]listener{"ops": {s.opsPort, "OPS_ADDR"}}
	if s.port != 0 {
		wantPorts["http"] = listener{s.port, "HTTP_ADDR"}
	} else if _, ok := envValue(c, "HTTP_ADDR"); ok {
		t.Errorf("%s: HTTP_ADDR set, but the service has no API port", s.name)
	}
	if len(c.Ports) != len(wantPorts) {
		t.Errorf("%s: container ports %v, want exactly %v", s.name, c.Ports, wantPorts)
	}
	for _, name := range sortedKeys(wantPorts) {
		want := wantPorts[name]
		port, ok := containerPort(c, intstr.FromString(name))
		if !ok || int(port) != want.port {
			t.Errorf("%s: want a container port named %s = %d, got %v", s.name, name, want.port, c.Ports)
		}
		addr, ok := envValue(c, want.env)
		if !ok {
			t.Errorf("%s: %s not set on the container", s.name, want.env)
		} else if _, p, err := net.SplitHostPort(addr.Value); err != nil || p != strconv.Itoa(want.port) {
			t.Errorf("%s: %s %q does not listen on the container port %d", s.name, want.env, addr.Value, want.port)
		}
	}

	// Configuration: the shared ConfigMap, and the JWT key from the Secret.
	cm := theConfigMap(t, r)
	var fromConfig bool
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil && ef.ConfigMapRef.Name == cm.Name {
			fromConfig = true
		}
		if ef.SecretRef != nil && ef.SecretRef.Name == authSecret {
			t.Errorf("%s: the JWT Secret must come in as AUTH_JWT_SECRET by secretKeyRef", s.name)
		}
	}
	if !fromConfig {
		t.Errorf("%s: env not taken from ConfigMap %s", s.name, cm.Name)
	}
	for _, e := range c.Env {
		if !envNameKnown(t, e.Name) {
			t.Errorf("%s: env %s is not a variable any service reads", s.name, e.Name)
		}
		if e.Name == "AUTH_DEV_MODE" || e.Name == "AUTH_JWT_SECRET" && e.Value != "" {
			t.Errorf("%s: %s set literally on the container", s.name, e.Name)
		}
	}
	jwt, ok := envValue(c, "AUTH_JWT_SECRET")
	switch {
	case s.auth && (!ok || jwt.ValueFrom == nil || jwt.ValueFrom.SecretKeyRef == nil):
		t.Errorf("%s: AUTH_JWT_SECRET must come from a secretKeyRef", s.name)
	case s.auth:
		ref := jwt.ValueFrom.SecretKeyRef
		if ref.Key != authKey || (ref.Optional != nil && *ref.Optional) {
			t.Errorf("%s: AUTH_JWT_SECRET from key %q (optional %v), want required key %s", s.name, ref.Key, ref.Optional, authKey)
		}
		if o.generatedSecret {
			if r.secrets[ref.Name] == nil {
				t.Errorf("%s: AUTH_JWT_SECRET names Secret %s, which the overlay does not generate", s.name, ref.Name)
			}
		} else if ref.Name != authSecret {
			t.Errorf("%s: AUTH_JWT_SECRET from Secret %q, want %s (created by the operator)", s.name, ref.Name, authSecret)
		}
	case ok:
		t.Errorf("%s: does not verify JWTs, yet gets AUTH_JWT_SECRET", s.name)
	}

	// Probes: all three, over HTTP on the ops listener.
	probes := map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe}
	wantPath := map[string][]string{"startup": {"/healthz", "/readyz"}, "readiness": {"/readyz"}, "liveness": {"/healthz"}}
	for _, kind := range []string{"startup", "readiness", "liveness"} {
		p := probes[kind]
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", s.name, kind)
			continue
		}
		if !slices.Contains(wantPath[kind], p.HTTPGet.Path) {
			t.Errorf("%s: %s probe on %q, want one of %v", s.name, kind, p.HTTPGet.Path, wantPath[kind])
		}
		if p.HTTPGet.Port != intstr.FromString("ops") {
			t.Errorf("%s: %s probe on port %v, want the named port ops", s.name, kind, p.HTTPGet.Port.String())
		}
	}
	if p := c.StartupProbe; p != nil && s.database && p.PeriodSeconds*p.FailureThreshold < 60 {
		t.Errorf("%s: startup probe gives up after %ds, before STARTUP_TIMEOUT (60s) waiting for PostgreSQL", s.name, p.PeriodSeconds*p.FailureThreshold)
	}

	// Resources: requests and limits for CPU and memory, requests <= limits.
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okr := c.Resources.Requests[res]
		lim, okl := c.Resources.Limits[res]
		if !okr || !okl || req.IsZero() || lim.IsZero() {
			t.Errorf("%s: want %s request and limit, got %v / %v", s.name, res, c.Resources.Requests, c.Resources.Limits)
		} else if req.Cmp(lim) > 0 {
			t.Errorf("%s: %s request %s above limit %s", s.name, res, req.String(), lim.String())
		}
	}

	// Security: non-root, read-only root, no escalation, no capabilities,
	// the runtime's seccomp profile (the restricted Pod Security Standard).
	psc := ps.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		t.Fatalf("%s: no container securityContext", s.name)
	}
	runAsNonRoot := csc.RunAsNonRoot
	if runAsNonRoot == nil {
		runAsNonRoot = psc.RunAsNonRoot
	}
	runAsUser := csc.RunAsUser
	if runAsUser == nil {
		runAsUser = psc.RunAsUser
	}
	seccomp := csc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	switch {
	case runAsNonRoot == nil || !*runAsNonRoot:
		t.Errorf("%s: runAsNonRoot not true", s.name)
	case runAsUser == nil || *runAsUser != nonrootUID:
		t.Errorf("%s: runAsUser %v, want %d (the distroless nonroot user)", s.name, runAsUser, nonrootUID)
	case csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem:
		t.Errorf("%s: root filesystem writable", s.name)
	case csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation:
		t.Errorf("%s: privilege escalation allowed", s.name)
	case csc.Privileged != nil && *csc.Privileged:
		t.Errorf("%s: privileged", s.name)
	case csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") || len(csc.Capabilities.Add) != 0:
		t.Errorf("%s: capabilities %v, want drop ALL and add none", s.name, csc.Capabilities)
	case seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("%s: seccomp profile %v, want RuntimeDefault", s.name, seccomp)
	}

	// Shutdown: preStop sleeps (native action: no shell in the image), then
	// SIGTERM and SHUTDOWN_TIMEOUT; the grace period must cover both.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Errorf("%s: want a preStop sleep action", s.name)
		return
	}
	if c.Lifecycle.PreStop.Exec != nil {
		t.Errorf("%s: preStop exec cannot run in a distroless image", s.name)
	}
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if preStop <= 0 {
		t.Errorf("%s: preStop sleep %s", s.name, preStop)
	}
	shutdown := s.shutdown
	if e, ok := envValue(c, "SHUTDOWN_TIMEOUT"); ok {
		if shutdown, err = time.ParseDuration(e.Value); err != nil {
			t.Errorf("%s: SHUTDOWN_TIMEOUT %q: %v", s.name, e.Value, err)
		}
	}
	if ps.TerminationGracePeriodSeconds == nil {
		t.Errorf("%s: no terminationGracePeriodSeconds", s.name)
	} else if grace := time.Duration(*ps.TerminationGracePeriodSeconds) * time.Second; grace <= preStop+shutdown {
		t.Errorf("%s: terminationGracePeriodSeconds %s not above preStop %s + SHUTDOWN_TIMEOUT %s", s.name, grace, preStop, shutdown)
	}

	// The dispatcher's standby must not share its leader's node in prod.
	if !s.hpa && o.dir == "overlays/prod" {
		spread := len(ps.TopologySpreadConstraints) > 0
		if a := ps.Affinity; a != nil && a.PodAntiAffinity != nil {
			for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector); err == nil && sel.Matches(labels.Set(pod.Labels)) && term.TopologyKey == "kubernetes.io/hostname" {
					spread = true
				}
			}
		}
		if !spread {
			t.Errorf("%s: prod needs pod anti-affinity or topology spread for the standby", s.name)
		}
	}
}

func int32p(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}

// deploymentsSelectedBy lists the Deployments whose pods a selector matches.
func deploymentsSelectedBy(r *rendered, sel labels.Selector) []string {
	var out []string
	for _, name := range sortedKeys(r.deployments) {
		if sel.Matches(labels.Set(r.deployments[name].Spec.Template.Labels)) {
			out = append(out, name)
		}
	}
	return out
}

func checkServices(t *testing.T, r *rendered) {
	t.Helper()
	for _, name := range sortedKeys(r.services) {
		svc := r.services[name]
		if svc.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("Service %s: type %q, want ClusterIP", name, svc.Spec.Type)
		}
		if len(svc.Spec.Selector) == 0 {
			t.Errorf("Service %s: no selector", name)
			continue
		}
		matched := deploymentsSelectedBy(r, labels.SelectorFromSet(svc.Spec.Selector))
		if len(matched) != 1 || matched[0] != name {
			t.Errorf("Service %s selects Deployments %v, want exactly [%s]", name, matched, name)
			continue
		}
		s, _ := serviceNamed(name)
		c := &r.deployments[name].Spec.Template.Spec.Containers[0]
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" {
			t.Errorf("Service %s: want one port named http, got %v", name, svc.Spec.Ports)
			continue
		}
		p := svc.Spec.Ports[0]
		if got, ok := containerPort(c, p.TargetPort); !ok || int(got) != s.port || s.port == 0 {
			t.Errorf("Service %s: targetPort %s is not the API container port %d (the ops port %d is in no Service)", name, p.TargetPort.String(), s.port, s.opsPort)
		}
	}
	for _, s := range services {
		if s.port != 0 && r.services[s.name] == nil {
			t.Errorf("no Service %s", s.name)
		}
		if s.port == 0 && r.services[s.name] != nil {
			t.Errorf("Service %s: the service has no API port, nothing routes to it", s.name)
		}
	}
}

func checkPDBs(t *testing.T, r *rendered) {
	t.Helper()
	covered := map[string]int{}
	for _, name := range sortedKeys(r.pdbs) {
		pdb := r.pdbs[name]
		if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
			t.Errorf("PodDisruptionBudget %s: want exactly one of minAvailable and maxUnavailable", name)
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() {
			t.Errorf("PodDisruptionBudget %s: bad or empty selector (%v)", name, err)
			continue
		}
		matched := deploymentsSelectedBy(r, sel)
		if len(matched) != 1 {
			t.Errorf("PodDisruptionBudget %s covers Deployments %v, want exactly one", name, matched)
		}
		for _, d := range matched {
			covered[d]++
		}
	}
	for _, name := range sortedKeys(r.deployments) {
		if covered[name] != 1 {
			t.Errorf("Deployment %s is covered by %d PodDisruptionBudgets, want 1", name, covered[name])
		}
	}
}

func checkHPAs(t *testing.T, r *rendered) {
	t.Helper()
	var want []string
	for _, s := range services {
		if s.hpa {
			want = append(want, s.name)
		}
	}
	var targets []string
	for _, name := range sortedKeys(r.hpas) {
		h := r.hpas[name]
		ref := h.Spec.ScaleTargetRef
		if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || r.deployments[ref.Name] == nil {
			t.Errorf("HPA %s targets %s %s/%s, which is not a Deployment here", name, ref.APIVersion, ref.Kind, ref.Name)
			continue
		}
		targets = append(targets, ref.Name)
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			t.Errorf("HPA %s: bounds %s..%d", name, int32p(h.Spec.MinReplicas), h.Spec.MaxReplicas)
		}
		resources := map[corev1.ResourceName]bool{}
		for _, m := range h.Spec.Metrics {
			if m.Resource != nil && m.Resource.Target.AverageUtilization != nil {
				resources[m.Resource.Name] = true
			}
		}
		if !resources[corev1.ResourceCPU] {
			t.Errorf("HPA %s: no CPU utilisation target", name)
		}
		if ref.Name == "notification-service" && !resources[corev1.ResourceMemory] {
			t.Errorf("HPA %s: no memory utilisation target (open streams hold memory)", name)
		}
		// Utilisation is relative to requests: every one of them is set.
		c := r.deployments[ref.Name].Spec.Template.Spec.Containers[0]
		for res := range resources {
			if _, ok := c.Resources.Requests[res]; !ok {
				t.Errorf("HPA %s scales on %s, but the container requests none", name, res)
			}
		}
	}
	slices.Sort(targets)
	slices.Sort(want)
	if !slices.Equal(targets, want) {
		t.Errorf("HPAs target %v, want exactly %v", targets, want)
	}
}

// route is one Ingress path.
type route struct {
	ingress  *networkingv1.Ingress
	path     string
	pathType networkingv1.PathType
	service  string
	port     string
}

func routes(t *testing.T, r *rendered) []route {
	t.Helper()
	var out []route
	for _, name := range sortedKeys(r.ingresses) {
		ing := r.ingresses[name]
		if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" {
			t.Errorf("Ingress %s: ingressClassName %v, want nginx", name, ing.Spec.IngressClassName)
		}
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			for _, p := range rule.HTTP.Paths {
				if p.PathType == nil || p.Backend.Service == nil {
					t.Errorf("Ingress %s: path %s without pathType or service backend", name, p.Path)
					continue
				}
				out = append(out, route{ingress: ing, path: p.Path, pathType: *p.PathType, service: p.Backend.Service.Name, port: p.Backend.Service.Port.Name})
			}
		}
	}
	return out
}

// match reports whether a route takes a request path, as ingress-nginx does
// (Prefix by path elements, ImplementationSpecific as an anchored,
// case-insensitive regex when use-regex is on).
func (rt route) match(t *testing.T, p string) bool {
	switch rt.pathType {
	case networkingv1.PathTypePrefix:
		pre := strings.TrimSuffix(rt.path, "/")
		return pre == "" || p == pre || strings.HasPrefix(p, pre+"/")
	case networkingv1.PathTypeExact:
		return p == rt.path
	case networkingv1.PathTypeImplementationSpecific:
		if rt.ingress.Annotations["nginx.ingress.kubernetes.io/use-regex"] != "true" {
			t.Errorf("Ingress %s: ImplementationSpecific path %s without use-regex", rt.ingress.Name, rt.path)
			return false
		}
		re, err := regexp.Compile("(?i)^" + rt.path)
		if err != nil {
			t.Errorf("Ingress %s: path %s is not a regex: %v", rt.ingress.Name, rt.path, err)
			return false
		}
		return re.MatchString(p)
	}
	return false
}

// backendFor picks the route ingress-nginx would: the longest matching path.
func backendFor(t *testing.T, rs []route, p string) (route, bool) {
	var best route
	found := false
	for _, rt := range rs {
		if rt.match(t, p) && (!found || len(rt.path) > len(best.path)) {
			best, found = rt, true
		}
	}
	return best, found
}

func checkIngress(t *testing.T, r *rendered) {
	t.Helper()
	rs := routes(t, r)
	for _, rt := range rs {
		svc := r.services[rt.service]
		if svc == nil {
			t.Errorf("Ingress %s: path %s goes to Service %s, which does not exist", rt.ingress.Name, rt.path, rt.service)
			continue
		}
		if s, _ := serviceNamed(rt.service); !s.public {
			t.Errorf("Ingress %s: path %s exposes %s, which is not public", rt.ingress.Name, rt.path, rt.service)
		}
		if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].Name != rt.port {
			t.Errorf("Ingress %s: path %s goes to port %q, not the Service's port http", rt.ingress.Name, rt.path, rt.port)
		}
	}
	has := func(path string, pt networkingv1.PathType, service string) bool {
		for _, rt := range rs {
			if rt.path == path && rt.pathType == pt && rt.service == service {
				return true
			}
		}
		return false
	}
	if !has("/api/v1/orders", networkingv1.PathTypePrefix, "order-service") {
		t.Error("no Prefix route /api/v1/orders -> order-service")
	}
	if !has("/", networkingv1.PathTypePrefix, "queue-gateway") {
		t.Error("no Prefix route / -> queue-gateway")
	}
	sse := map[string]string{
		"nginx.ingress.kubernetes.io/use-regex":          "true",
		"nginx.ingress.kubernetes.io/proxy-buffering":    "off",
		"nginx.ingress.kubernetes.io/proxy-read-timeout": "3600",
		"nginx.ingress.kubernetes.io/proxy-send-timeout": "3600",
	}
	for _, c := range []struct{ path, want string }{
		{"/", "queue-gateway"},
		{"/static/app.js", "queue-gateway"},
		{"/api/v1/queues/demo/enter", "queue-gateway"},
		{"/api/v1/queues/demo/position", "queue-gateway"},
		{"/api/v1/queues/demo", "queue-gateway"},
		{"/admin/v1/queues/demo", "queue-gateway"},
		{"/api/v1/dev/token", "queue-gateway"},
		{"/api/v1/ordersx", "queue-gateway"},
		{"/api/v1/orders", "order-service"},
		{"/api/v1/orders/0b7e", "order-service"},
		{"/api/v1/products", "order-service"},
		{"/api/v1/queues/demo/events", "notification-service"},
		{"/api/v1/queues/flash-sale_2/events", "notification-service"},
		{"/api/v1/queues/a/b/events", "queue-gateway"},
	} {
		rt, ok := backendFor(t, rs, c.path)
		if !ok || rt.service != c.want {
			t.Errorf("%s goes to %q, want %s", c.path, rt.service, c.want)
			continue
		}
		// The stream needs the SSE settings; nothing else may have them.
		stream := c.want == "notification-service"
		for k, v := range sse {
			if got := rt.ingress.Annotations[k]; stream && got != v {
				t.Errorf("%s: Ingress %s annotation %s = %q, want %q", c.path, rt.ingress.Name, k, got, v)
			}
		}
		if !stream && rt.ingress.Annotations[sseIngress] == "off" {
			t.Errorf("%s: Ingress %s turns proxy buffering off for a REST route", c.path, rt.ingress.Name)
		}
	}
}

func checkNetworkPolicies(t *testing.T, r *rendered) {
	t.Helper()
	var all, public []string
	for _, s := range services {
		all = append(all, s.name)
		if s.public {
			public = append(public, s.name)
		}
	}
	slices.Sort(all)
	slices.Sort(public)
	var denyAll, fromIngress, fromPrometheus bool
	for _, name := range sortedKeys(r.netpols) {
		np := r.netpols[name]
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Errorf("NetworkPolicy %s: %v", name, err)
			continue
		}
		if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("NetworkPolicy %s: policyTypes %v, want [Ingress] (egress stays open: the servers are outside)", name, np.Spec.PolicyTypes)
		}
		selected := deploymentsSelectedBy(r, sel)
		if len(np.Spec.Ingress) == 0 {
			if np.Spec.PodSelector.MatchLabels[partOf] == "waitingroom" && slices.Equal(selected, all) {
				denyAll = true
			}
			continue
		}
		for _, rule := range np.Spec.Ingress {
			if len(rule.From) != 1 || rule.From[0].NamespaceSelector == nil || rule.From[0].PodSelector != nil || rule.From[0].IPBlock != nil {
				t.Errorf("NetworkPolicy %s: want one namespaceSelector peer per rule, got %v", name, rule.From)
				continue
			}
			// The ingress controller reaches the API port, Prometheus the
			// ops listener; neither reaches the other.
			peer := rule.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
			wantPort := map[string]string{ingressNS: "http", monitoringN: "ops"}[peer]
			for _, p := range rule.Ports {
				if p.Port == nil || *p.Port != intstr.FromString(wantPort) {
					t.Errorf("NetworkPolicy %s: port %v for %s, want the named port %s", name, p.Port, peer, wantPort)
				}
			}
			if len(rule.Ports) == 0 {
				t.Errorf("NetworkPolicy %s: a rule open on every port", name)
			}
			switch peer {
			case ingressNS:
				if !slices.Equal(selected, public) {
					t.Errorf("NetworkPolicy %s: the ingress controller reaches %v, want %v", name, selected, public)
				}
				fromIngress = true
			case monitoringN:
				if !slices.Equal(selected, all) {
					t.Errorf("NetworkPolicy %s: Prometheus reaches %v, want %v", name, selected, all)
				}
				fromPrometheus = true
			default:
				t.Errorf("NetworkPolicy %s: unexpected peer %v", name, rule.From[0].NamespaceSelector)
			}
		}
	}
	if !denyAll || !fromIngress || !fromPrometheus {
		t.Errorf("NetworkPolicies: default deny %v, ingress controller %v, Prometheus %v; want all three", denyAll, fromIngress, fromPrometheus)
	}
}

// TestOverlayDifferences checks what dev and prod must do differently.
func TestOverlayDifferences(t *testing.T) {
	dev, prod := render(t, "overlays/dev"), render(t, "overlays/prod")
	for _, s := range services {
		if !s.hpa {
			for _, r := range []*rendered{dev, prod} {
				if d := r.deployments[s.name]; d == nil || d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
					t.Errorf("%s: %s wants 2 replicas", r.dir, s.name)
				}
			}
			continue
		}
		hd, hp := dev.hpas[s.name], prod.hpas[s.name]
		if hd == nil || hp == nil {
			t.Errorf("%s: HPA missing in dev or prod", s.name)
			continue
		}
		if *hd.Spec.MinReplicas != 1 {
			t.Errorf("dev: %s HPA minReplicas %d, want 1", s.name, *hd.Spec.MinReplicas)
		}
		if *hp.Spec.MinReplicas < 2 || *hp.Spec.MinReplicas <= *hd.Spec.MinReplicas || hp.Spec.MaxReplicas <= hd.Spec.MaxReplicas {
			t.Errorf("%s: prod HPA bounds %d..%d not above dev's %d..%d", s.name, *hp.Spec.MinReplicas, hp.Spec.MaxReplicas, *hd.Spec.MinReplicas, hd.Spec.MaxReplicas)
		}
		cd := dev.deployments[s.name].Spec.Template.Spec.Containers[0].Resources
		cp := prod.deployments[s.name].Spec.Template.Spec.Containers[0].Resources
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if a, b := cd.Requests[res], cp.Requests[res]; a.Cmp(b) > 0 {
				t.Errorf("%s: dev requests more %s (%s) than prod (%s)", s.name, res, a.String(), b.String())
			}
		}
	}
	// Prod has a real host with TLS on every Ingress.
	for _, name := range sortedKeys(prod.ingresses) {
		ing := prod.ingresses[name]
		if len(ing.Spec.TLS) == 0 || len(ing.Spec.Rules) == 0 || ing.Spec.Rules[0].Host == "" || !slices.Contains(ing.Spec.TLS[0].Hosts, ing.Spec.Rules[0].Host) {
			t.Errorf("prod: Ingress %s needs a host and TLS for it", name)
			continue
		}
		if got, want := theConfigMap(t, prod).Data["ORDER_SERVICE_PUBLIC_URL"], "https://"+ing.Spec.Rules[0].Host; got != want {
			t.Errorf("prod: ORDER_SERVICE_PUBLIC_URL %q, want the Ingress origin %s", got, want)
		}
	}
}
