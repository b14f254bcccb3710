// Command matrix checks a cluster's connectivity against an oracle: every pod of the given
// namespaces opens a TCP connection to every other on each port, on the default network
// (eth0) and on one secondary network, and each outcome must be what the oracle (oracle.go)
// computes from the pods, namespaces, NetworkPolicies and MultiNetworkPolicies. It prints the
// matrix and exits 1 on any disagreement. scripts/k8s-smoke.sh runs it; the servers are the
// pods' own (an HTTP server on each port), the clients busybox's nc, through kubectl exec.
//
//	go run ./e2e/matrix --kubeconfig K --kubectl KUBECTL --namespaces mx-a,mx-b \
//	    --network default/blue --ports 80,81
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var mnpResource = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1beta1", Resource: "multi-networkpolicies"}

const policyFor = "k8s.v1.cni.cncf.io/policy-for"

// probe is one connection of the matrix.
type probe struct {
	from, to *corev1.Pod
	network  string // "eth0" or the secondary network's NAD
	addr     netip.Addr
	port     int32
}

func (p probe) target() string { return fmt.Sprintf("%s:%d", p.addr, p.port) }

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the cluster's kubeconfig")
	kubectl := flag.String("kubectl", "kubectl", "kubectl, to exec in pods")
	namespaces := flag.String("namespaces", "", "the pods' namespaces, comma-separated")
	network := flag.String("network", "", "the secondary network's NAD, namespace/name")
	portList := flag.String("ports", "80", "the servers' ports, comma-separated")
	within := flag.Duration("within", 30*time.Second, "keep trying while they disagree")
	flag.Parse()
	if err := run(*kubeconfig, *kubectl, strings.Split(*namespaces, ","), *network, *portList, *within); err != nil {
		fmt.Fprintln(os.Stderr, "matrix:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, kubectl string, namespaces []string, network, portList string, within time.Duration) error {
	var ports []int32
	for _, p := range strings.Split(portList, ",") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("--ports: %v", err)
		}
		ports = append(ports, int32(n))
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(within)
	for {
		probes, worlds, err := plan(cfg, namespaces, network, ports)
		if err != nil {
			return err
		}
		got := measure(kubectl, kubeconfig, probes)
		bad := report(probes, worlds, got, os.Stdout)
		if bad == 0 {
			fmt.Printf("matrix: all %d connections as the oracle says\n", len(probes))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d connections disagree with the oracle", bad, len(probes))
		}
		fmt.Printf("matrix: %d disagree; again in 3 s\n", bad)
		time.Sleep(3 * time.Second)
	}
}

// plan reads the objects: the probes, and the oracle's world for each network.
func plan(cfg *rest.Config, namespaces []string, network string, ports []int32) ([]probe, map[string]*World, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	ctx := context.Background()
	nsList, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	eth0 := &World{Namespaces: map[string]*corev1.Namespace{}}
	secondary := &World{Namespaces: eth0.Namespaces}
	for i := range nsList.Items {
		eth0.Namespaces[nsList.Items[i].Name] = &nsList.Items[i]
	}
	nps, err := cs.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, p := range nps.Items {
		eth0.Policies = append(eth0.Policies, Policy{Namespace: p.Namespace, Spec: p.Spec})
	}
	mnps, err := dc.Resource(mnpResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, u := range mnps.Items {
		if !names(u.GetAnnotations()[policyFor], u.GetNamespace(), network) {
			continue
		}
		p := Policy{Namespace: u.GetNamespace()}
		spec, _ := u.Object["spec"].(map[string]any)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &p.Spec); err != nil {
			return nil, nil, fmt.Errorf("multi-network policy %s/%s: %v", u.GetNamespace(), u.GetName(), err)
		}
		secondary.Policies = append(secondary.Policies, p)
	}
	var pods []*corev1.Pod
	for _, ns := range namespaces {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, err
		}
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
	}
	sort.Slice(pods, func(i, j int) bool { return key(pods[i]) < key(pods[j]) })
	var probes []probe
	for _, from := range pods {
		for _, net := range []string{"eth0", network} {
			for _, to := range pods {
				if from == to {
					continue
				}
				a, err := addressOn(to, net)
				if err != nil {
					return nil, nil, err
				}
				for _, port := range ports {
					probes = append(probes, probe{from, to, net, a, port})
				}
			}
		}
	}
	return probes, map[string]*World{"eth0": eth0, network: secondary}, nil
}

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// names says whether a policy-for annotation of a policy in namespace ns names the NAD
// network ("namespace/name").
func names(annotation, ns, network string) bool {
	for _, ref := range strings.Split(annotation, ",") {
		ref = strings.TrimSpace(ref)
		if !strings.Contains(ref, "/") {
			ref = ns + "/" + ref
		}
		if ref == network {
			return true
		}
	}
	return false
}

// addressOn is the pod's address on the NAD network, from Multus' network-status annotation,
// or on eth0 (its pod IP).
func addressOn(p *corev1.Pod, network string) (netip.Addr, error) {
	if network == "eth0" {
		a, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil {
			return a, fmt.Errorf("pod %s: no address", key(p))
		}
		return a, nil
	}
	var st []struct {
		Name string   `json:"name"`
		IPs  []string `json:"ips"`
	}
	if err := json.Unmarshal([]byte(p.Annotations["k8s.v1.cni.cncf.io/network-status"]), &st); err != nil {
		return netip.Addr{}, fmt.Errorf("pod %s: network-status: %v", key(p), err)
	}
	for _, s := range st {
		if s.Name == network && len(s.IPs) > 0 {
			return netip.ParseAddr(s.IPs[0])
		}
	}
	return netip.Addr{}, fmt.Errorf("pod %s: no address on %s", key(p), network)
}

// measure runs each client's probes in it (one kubectl exec per client, all at once): an
// HTTP request with busybox nc, one second to answer. Whether each got an answer.
func measure(kubectl, kubeconfig string, probes []probe) map[string]bool {
	byClient := map[*corev1.Pod][]string{}
	for _, p := range probes {
		byClient[p.from] = append(byClient[p.from], p.target())
	}
	got := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for from, targets := range byClient {
		wg.Add(1)
		go func() {
			defer wg.Done()
			script := `for t in "$@"; do
  r=$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 1 "${t%:*}" "${t#*:}" 2>/dev/null | head -c 4)
  if [ -n "$r" ]; then echo "$t ok"; else echo "$t no"; fi
done`
			args := append([]string{"--kubeconfig", kubeconfig, "exec", "-n", from.Namespace, from.Name, "--", "sh", "-c", script, "sh"}, targets...)
			out, _ := exec.Command(kubectl, args...).Output()
			mu.Lock()
			defer mu.Unlock()
			for _, line := range strings.Split(string(out), "\n") {
				if t, r, ok := strings.Cut(line, " "); ok {
					got[key(from)+">"+t] = r == "ok"
				}
			}
		}()
	}
	wg.Wait()
	return got
}

// report prints the matrix (one line per client and network: each server and port, + for a
// connection made, . for none, ! where the oracle disagrees) and returns the disagreements.
func report(probes []probe, worlds map[string]*World, got map[string]bool, out *os.File) int {
	bad := 0
	line, last := "", ""
	flush := func() {
		if line != "" {
			fmt.Fprintln(out, line)
		}
	}
	for _, p := range probes {
		row := fmt.Sprintf("%-14s %-14s", key(p.from), p.network)
		if row != last {
			flush()
			line, last = row, row
		}
		self, _ := addressOn(p.from, p.network)
		from := Endpoint{Pod: p.from, Addr: self}
		want := worlds[p.network].Allowed(from, Endpoint{Pod: p.to, Addr: p.addr}, p.port)
		have := got[key(p.from)+">"+p.target()]
		mark := map[bool]string{true: "+", false: "."}[have]
		if have != want {
			mark, bad = "!", bad+1
		}
		line += fmt.Sprintf(" %s:%d%s", p.to.Name, p.port, mark)
	}
	flush()
	return bad
}
