package manifests

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// rendered is one kustomization's output, decoded into the API types.
type rendered struct {
	dir         string // relative to k8s/
	counts      map[string]int
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	pdbs        map[string]*policyv1.PodDisruptionBudget
	hpas        map[string]*autoscalingv2.HorizontalPodAutoscaler
	ingresses   map[string]*networkingv1.Ingress
	netpols     map[string]*networkingv1.NetworkPolicy
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	namespaces  map[string]*corev1.Namespace
	rules       map[string]*monitoringv1.PrometheusRule
	// namespaceOf is each object's metadata.namespace, by "Kind/name".
	namespaceOf map[string]string
}

// kinds are the only kinds the manifests may contain, with their apiVersion.
var kinds = map[string]string{
	"Namespace":               "v1",
	"ConfigMap":               "v1",
	"Secret":                  "v1",
	"Service":                 "v1",
	"Deployment":              "apps/v1",
	"PodDisruptionBudget":     "policy/v1",
	"HorizontalPodAutoscaler": "autoscaling/v2",
	"Ingress":                 "networking.k8s.io/v1",
	"NetworkPolicy":           "networking.k8s.io/v1",
	"PrometheusRule":          "monitoring.coreos.com/v1",
}

var (
	renderMu    sync.Mutex
	renderCache = map[string]*rendered{}
)

// render runs kustomize over k8s/<dir> (once per test binary) and decodes
// every object strictly: a field the API type does not have fails.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	renderMu.Lock()
	defer renderMu.Unlock()
	if r, ok := renderCache[dir]; ok {
		return r
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot(t), "k8s", filepath.FromSlash(dir)))
	if err != nil {
		t.Fatalf("kustomize build k8s/%s: %v", dir, err)
	}
	r := &rendered{
		dir:         dir,
		counts:      map[string]int{},
		deployments: map[string]*appsv1.Deployment{},
		services:    map[string]*corev1.Service{},
		pdbs:        map[string]*policyv1.PodDisruptionBudget{},
		hpas:        map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		ingresses:   map[string]*networkingv1.Ingress{},
		netpols:     map[string]*networkingv1.NetworkPolicy{},
		configMaps:  map[string]*corev1.ConfigMap{},
		secrets:     map[string]*corev1.Secret{},
		namespaces:  map[string]*corev1.Namespace{},
		rules:       map[string]*monitoringv1.PrometheusRule{},
		namespaceOf: map[string]string{},
	}
	for _, obj := range res.Resources() {
		kind, name := obj.GetKind(), obj.GetName()
		y, err := obj.AsYAML()
		if err != nil {
			t.Fatalf("k8s/%s: %s/%s: %v", dir, kind, name, err)
		}
		if err := r.add(kind, obj.GetApiVersion(), name, y); err != nil {
			t.Fatalf("k8s/%s: %v", dir, err)
		}
		r.namespaceOf[kind+"/"+name] = obj.GetNamespace()
	}
	renderCache[dir] = r
	return r
}

// decodeStrict unmarshals one object's YAML into its API type as the API
// server's strict field validation does: duplicate keys, unknown fields and
// fields that match only case-insensitively (readinessprobe) all fail.
func decodeStrict(y []byte, into any) error {
	j, err := yaml.YAMLToJSONStrict(y)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, into)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func (r *rendered) add(kind, apiVersion, name string, y []byte) error {
	want, ok := kinds[kind]
	if !ok {
		return fmt.Errorf("%s/%s: kind not expected in these manifests", kind, name)
	}
	if apiVersion != want {
		return fmt.Errorf("%s/%s: apiVersion %s, want %s", kind, name, apiVersion, want)
	}
	var err error
	switch kind {
	case "Namespace":
		err = decodeInto(y, name, r.namespaces)
	case "ConfigMap":
		err = decodeInto(y, name, r.configMaps)
	case "Secret":
		err = decodeInto(y, name, r.secrets)
	case "Service":
		err = decodeInto(y, name, r.services)
	case "Deployment":
		err = decodeInto(y, name, r.deployments)
	case "PodDisruptionBudget":
		err = decodeInto(y, name, r.pdbs)
	case "HorizontalPodAutoscaler":
		err = decodeInto(y, name, r.hpas)
	case "Ingress":
		err = decodeInto(y, name, r.ingresses)
	case "NetworkPolicy":
		err = decodeInto(y, name, r.netpols)
	case "PrometheusRule":
		err = decodeInto(y, name, r.rules)
	}
	if err != nil {
		return fmt.Errorf("%s/%s: %w", kind, name, err)
	}
	r.counts[kind]++
	return nil
}

func decodeInto[T any](y []byte, name string, into map[string]*T) error {
	if _, dup := into[name]; dup {
		return fmt.Errorf("defined twice")
	}
	v := new(T)
	if err := decodeStrict(y, v); err != nil {
		return fmt.Errorf("strict decode: %w", err)
	}
	into[name] = v
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
