package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The custom resources the agent reads when the cluster has them: Multus'
// NetworkAttachmentDefinitions, the multi-networkpolicy project's MultiNetworkPolicies and
// veclane's own Networks (docs/k8s/network-crd.yaml).
var (
	nadResource     = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}
	mnpResource     = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1beta1", Resource: "multi-networkpolicies"}
	networkResource = schema.GroupVersionResource{Group: "veclane.dev", Version: "v1alpha1", Resource: "networks"}
)

// KubeSource is where the agent's Kubernetes objects come from.
type KubeSource interface {
	// Objects is the current view.
	Objects() (*KubeObjects, error)
	// Changed receives after any object changed (coalesced: one value for many changes).
	Changed() <-chan struct{}
}

// KubeWatch is a KubeSource over the API server: informers on pods, namespaces, services,
// EndpointSlices and NetworkPolicies, and on NetworkAttachmentDefinitions and
// MultiNetworkPolicies and Networks once their resources are served (looked for at start,
// then every crdRecheck until all are: a CRD installed after the agent is watched from then
// on).
type KubeWatch struct {
	factory  informers.SharedInformerFactory
	dyn      dynamicinformer.DynamicSharedInformerFactory
	mu       sync.Mutex
	nads     cache.GenericLister
	mnps     cache.GenericLister
	networks cache.GenericLister
	changed  chan struct{}
}

// crdRecheck is how often a KubeWatch looks again for the resources not served yet.
var crdRecheck = 30 * time.Second

// WatchKube starts the informers and waits until their caches have synced (or ctx ends).
func WatchKube(ctx context.Context, cfg *rest.Config, log *slog.Logger) (*KubeWatch, error) {
	if log == nil {
		log = slog.Default()
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	k := &KubeWatch{
		factory: informers.NewSharedInformerFactory(cs, 10*time.Minute),
		dyn:     dynamicinformer.NewDynamicSharedInformerFactory(dc, 10*time.Minute),
		changed: make(chan struct{}, 1),
	}
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { k.poke() },
		UpdateFunc: func(any, any) { k.poke() },
		DeleteFunc: func(any) { k.poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		k.factory.Core().V1().Pods().Informer(),
		k.factory.Core().V1().Namespaces().Informer(),
		k.factory.Core().V1().Services().Informer(),
		k.factory.Discovery().V1().EndpointSlices().Informer(),
		k.factory.Networking().V1().NetworkPolicies().Informer(),
	} {
		if _, err := inf.AddEventHandler(poke); err != nil {
			return nil, err
		}
	}
	k.factory.Start(ctx.Done())
	for t, ok := range k.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("kubernetes: the %v cache did not sync", t)
		}
	}
	if err := k.watchCRDs(ctx, cs, poke, log); err != nil {
		return nil, err
	}
	go func() {
		t := time.NewTicker(crdRecheck)
		defer t.Stop()
		for k.missing() {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := k.watchCRDs(ctx, cs, poke, log); err != nil {
				log.Warn("watching a custom resource", "error", err)
			}
		}
	}()
	return k, nil
}

// watchCRDs starts an informer on each custom resource not watched yet that the API server
// now serves, and waits for its cache.
func (k *KubeWatch) watchCRDs(ctx context.Context, cs kubernetes.Interface, h cache.ResourceEventHandler, log *slog.Logger) error {
	for _, r := range []struct {
		gvr    schema.GroupVersionResource
		lister *cache.GenericLister
	}{{nadResource, &k.nads}, {mnpResource, &k.mnps}, {networkResource, &k.networks}} {
		k.mu.Lock()
		have := *r.lister != nil
		k.mu.Unlock()
		if have {
			continue
		}
		if !served(cs, r.gvr) {
			log.Info("resource not served: not watched yet", "resource", r.gvr.String())
			continue
		}
		inf := k.dyn.ForResource(r.gvr)
		if _, err := inf.Informer().AddEventHandler(h); err != nil {
			return err
		}
		k.dyn.Start(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
			return fmt.Errorf("kubernetes: the %v cache did not sync", r.gvr)
		}
		log.Info("watching", "resource", r.gvr.String())
		k.mu.Lock()
		*r.lister = inf.Lister()
		k.mu.Unlock()
		k.poke()
	}
	return nil
}

// missing says whether a custom resource is not watched yet.
func (k *KubeWatch) missing() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.nads == nil || k.mnps == nil || k.networks == nil
}

// served says whether the API server serves gvr (its CRD is installed).
func served(cs kubernetes.Interface, gvr schema.GroupVersionResource) bool {
	list, err := cs.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true
		}
	}
	return false
}

func (k *KubeWatch) poke() {
	select {
	case k.changed <- struct{}{}:
	default:
	}
}

// Changed implements KubeSource.
func (k *KubeWatch) Changed() <-chan struct{} { return k.changed }

// Objects implements KubeSource: a copy of the caches' contents (the objects are shared
// with the caches: read only).
func (k *KubeWatch) Objects() (*KubeObjects, error) {
	var o KubeObjects
	var err error
	all := labels.Everything()
	if o.Pods, err = k.factory.Core().V1().Pods().Lister().List(all); err != nil {
		return nil, err
	}
	if o.Namespaces, err = k.factory.Core().V1().Namespaces().Lister().List(all); err != nil {
		return nil, err
	}
	if o.Services, err = k.factory.Core().V1().Services().Lister().List(all); err != nil {
		return nil, err
	}
	if o.Slices, err = k.factory.Discovery().V1().EndpointSlices().Lister().List(all); err != nil {
		return nil, err
	}
	if o.Policies, err = k.factory.Networking().V1().NetworkPolicies().Lister().List(all); err != nil {
		return nil, err
	}
	k.mu.Lock()
	nads, mnps, networks := k.nads, k.mnps, k.networks
	k.mu.Unlock()
	o.NetworksServed = networks != nil
	err = each(networks, func(u *unstructured.Unstructured) {
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		n, err := NetworkFromSpec(u.GetName(), spec)
		o.Networks = append(o.Networks, NetworkResource{Name: u.GetName(), Network: n, Err: err})
	})
	if err != nil {
		return nil, err
	}
	err = each(nads, func(u *unstructured.Unstructured) {
		conf, _, _ := unstructured.NestedString(u.Object, "spec", "config")
		o.NADs = append(o.NADs, NAD{Namespace: u.GetNamespace(), Name: u.GetName(), Network: NADNetwork(conf)})
	})
	if err != nil {
		return nil, err
	}
	err = each(mnps, func(u *unstructured.Unstructured) {
		mp := MultiPolicy{Namespace: u.GetNamespace(), Name: u.GetName(), PolicyFor: u.GetAnnotations()[PolicyForAnnotation]}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &mp.Spec); err != nil {
			o.Problems = append(o.Problems, fmt.Sprintf("multi-network policy %s/%s: its spec: %v: left out", mp.Namespace, mp.Name, err))
			return
		}
		o.MultiPolicies = append(o.MultiPolicies, mp)
	})
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// each calls f with every object of a dynamic lister (none when the resource is not
// watched).
func each(l cache.GenericLister, f func(*unstructured.Unstructured)) error {
	if l == nil {
		return nil
	}
	list, err := l.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, x := range list {
		if u, ok := x.(*unstructured.Unstructured); ok {
			f(u)
		}
	}
	return nil
}
