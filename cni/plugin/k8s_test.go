package plugin

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"os"
	"testing"

	"gopkg.in/yaml.v3"

	"veclane.dev/cni/cluster"
)

// docs/k8s holds the example Kubernetes deployment; its NetworkAttachmentDefinitions must be
// configurations this plugin accepts, and its Network resources networks the agents apply.
func TestTheKubernetesExamplesAreAccepted(t *testing.T) {
	docs := func(file string) []map[string]any {
		t.Helper()
		b, err := os.ReadFile("../../docs/k8s/" + file)
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		d := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var m map[string]any
			if err := d.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			out = append(out, m)
		}
		return out
	}
	nads := docs("nad-blue.yaml")
	if len(nads) != 2 {
		t.Fatalf("nad-blue.yaml: %d documents", len(nads))
	}
	for _, nad := range nads {
		config := nad["spec"].(map[string]any)["config"].(string)
		c, err := load([]byte(config))
		if err != nil {
			t.Fatalf("%v: %v", nad["metadata"], err)
		}
		if c.NetworkName != "blue" {
			t.Fatalf("network %q", c.NetworkName)
		}
	}
	for _, n := range docs("blue-network.yaml") {
		spec := n["spec"].(map[string]any)
		r, err := netip.ParsePrefix(spec["range"].(string))
		if err != nil {
			t.Fatal(err)
		}
		net := cluster.Network{Name: n["metadata"].(map[string]any)["name"].(string), VNI: uint32(spec["vni"].(int)), Range: r}
		if err := net.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	crd := docs("network-crd.yaml")[0]
	props := crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
	for _, f := range []string{"vni", "range", "physicalNetworkName"} {
		if props[f] == nil {
			t.Errorf("the CRD has no %s", f)
		}
	}
	for _, f := range []string{"daemonset.yaml", "pod.yaml"} {
		if len(docs(f)) == 0 {
			t.Errorf("%s is empty", f)
		}
	}
}
