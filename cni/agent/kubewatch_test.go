package agent

import (
	"context"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ctl"
	"veclane.dev/cni/internal/testkube"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crd installs a custom resource definition that keeps any spec (the tests write valid ones).
func crd(t *testing.T, dc dynamic.Interface, gvr schema.GroupVersionResource, kind, singular string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": gvr.Resource + "." + gvr.Group},
		"spec": map[string]any{
			"group": gvr.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": gvr.Resource, "singular": singular, "kind": kind, "listKind": kind + "List"},
			"versions": []any{map[string]any{
				"name": gvr.Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	if _, err := dc.Resource(crdResource).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, dc dynamic.Interface, gvr schema.GroupVersionResource, ns string, obj map[string]any) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := dc.Resource(gvr).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating %s: %v", gvr.Resource, err)
		}
		time.Sleep(200 * time.Millisecond) // the CRD is being established
	}
}

// An API server, a daemon, and the agent's Kubernetes half between them: a Service of a
// secondary network and a MultiNetworkPolicy (whose CRD is installed after the agent
// started) written to the API reach the daemon, and deleting them removes them.
func TestServicesAndPoliciesFromTheAPIServer(t *testing.T) {
	api := testkube.Start(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(api.Config)
	dc := dynamic.NewForConfigOrDie(api.Config)
	crd(t, dc, nadResource, "NetworkAttachmentDefinition", "network-attachment-definition")
	// The MultiNetworkPolicy CRD comes after the agent started: looked for again.
	defer func(d time.Duration) { crdRecheck = d }(crdRecheck)
	crdRecheck = 200 * time.Millisecond
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}))
	for _, p := range []struct{ name, app string }{{"web", "web"}, {"cli", "cli"}} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: p.name, Labels: map[string]string{"app": p.app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:fixed",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		}
		got, err := cs.CoreV1().Pods("shop").Create(ctx, pod, metav1.CreateOptions{})
		must(got, err)
		got.Status.Phase = corev1.PodRunning
		got.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		must(cs.CoreV1().Pods("shop").UpdateStatus(ctx, got, metav1.UpdateOptions{}))
	}
	create(t, dc, nadResource, "shop", map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": "blue"},
		"spec":     map[string]any{"config": `{"cniVersion":"1.1.0","name":"blue","type":"veclane-cni","network_name":"local"}`},
	})
	must(cs.CoreV1().Services("shop").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"k8s.v1.cni.cncf.io/service-network": "blue"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{}))

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kw, err := WatchKube(wctx, api.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !kw.missing() {
		t.Fatal("the MultiNetworkPolicy resource is watched before it exists")
	}
	crd(t, dc, mnpResource, "MultiNetworkPolicy", "multi-networkpolicy")
	create(t, dc, mnpResource, "shop", map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1beta1", "kind": "MultiNetworkPolicy",
		"metadata": map[string]any{"name": "web-in", "annotations": map[string]any{PolicyForAnnotation: "blue"}},
		"spec": map[string]any{
			"podSelector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"ingress":     []any{map[string]any{"from": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": "cli"}}}}}},
		},
	})

	_, d := startDaemon(t, t.TempDir())
	atts := []cluster.PodAttachment{
		att("local", "shop", "web", "", "10.50.0.2", "n1"),
		att("local", "shop", "cli", "", "10.50.0.3", "n1"),
	}
	for i := range atts {
		atts[i].Pod.UID = "" // the plugin records none without K8S_POD_UID
	}
	var a StatefulApplier
	round := func() []string {
		t.Helper()
		objs, err := kw.Objects()
		if err != nil {
			t.Fatal(err)
		}
		want, problems := DesiredStateful(objs, atts, "n1", "local", nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		if _, failed, err := a.Apply(d, want); err != nil || len(failed) > 0 {
			t.Fatal(err, failed)
		}
		// The API server's own Service, default/kubernetes, is in the default network too;
		// the test's objects are the others.
		var out []string
		for _, n := range names(d, t) {
			if !strings.Contains(n, "/default/kubernetes:") {
				out = append(out, n)
			}
		}
		return out
	}
	// Until the informers have seen everything, the round can miss the latest objects.
	var got []string
	for deadline := time.Now().Add(20 * time.Second); ; {
		got = round()
		if len(got) == 3 || time.Now().After(deadline) {
			break
		}
		waitChanged(kw, time.Second)
	}
	if !reflect.DeepEqual(got, []string{
		"service svc/local/shop/web:80/tcp", "policy mnp/local/shop/web-in", "address-set mnp/local/shop/web-in/in0/0",
	}) {
		t.Fatalf("%v", got)
	}
	svcs, _ := ctl.Call[ctl.Services](d.Client, ctl.ShowService{})
	var s ctl.ServiceAdd
	for _, x := range svcs.Services {
		if x.Spec.Name == "svc/local/shop/web:80/tcp" {
			s = x.Spec
		}
	}
	// The daemon says "ready", its default, by leaving the state out.
	if !strings.HasPrefix(s.VIP.String(), "10.96.") || len(s.Backends) != 1 || s.Backends[0] != (ctl.Backend{Addr: netip.MustParseAddr("10.50.0.2"), Port: 8080}) {
		t.Fatalf("%+v", s)
	}
	// The policy and the service are deleted in the API: gone from the daemon.
	if err := dc.Resource(mnpResource).Namespace("shop").Delete(ctx, "web-in", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Services("shop").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if !waitChanged(kw, 5*time.Second) && time.Now().After(deadline) {
			t.Fatalf("no change seen; the daemon holds %v", names(d, t))
		}
		if got = round(); len(got) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %v", got)
		}
	}
}

func waitChanged(k KubeSource, d time.Duration) bool {
	select {
	case <-k.Changed():
		return true
	case <-time.After(d):
		return false
	}
}
