package ipamplugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"veclane.dev/cni/internal/testbin"
	"veclane.dev/cni/internal/testetcd"
)

// bin holds the plugin, built once.
var bin string

// The plugin is tested as a runtime runs it: the binary, with CNI_* variables and the network
// configuration on stdin.
func TestMain(m *testing.M) { testbin.Main(m, &bin, "veclane-ipam") }

type result struct {
	ok     bool
	stdout map[string]any
	raw    string
}

func call(t *testing.T, cmd, container, ifname, conf string) result {
	t.Helper()
	c := exec.Command(filepath.Join(bin, "veclane-ipam"))
	c.Env = append(os.Environ(),
		"CNI_COMMAND="+cmd, "CNI_CONTAINERID="+container, "CNI_IFNAME="+ifname,
		"CNI_NETNS=/var/run/netns/test", "CNI_PATH=/opt/cni/bin", "VECLANE_NODE=test-node")
	c.Stdin = strings.NewReader(conf)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	r := result{ok: err == nil, raw: out.String() + errb.String()}
	if out.Len() > 0 {
		if jerr := json.Unmarshal(out.Bytes(), &r.stdout); jerr != nil {
			t.Fatalf("%s: stdout is not JSON: %q", cmd, out.String())
		}
	}
	return r
}

func conf(endpoint, extra string) string {
	return fmt.Sprintf(`{"cniVersion":"1.1.0","name":"blue","type":"some-main-plugin",
		"ipam":{"type":"veclane-ipam","range":"10.1.0.0/24","range_start":"10.1.0.10","gateway":"10.1.0.1",
		"routes":[{"dst":"0.0.0.0/0"}],"etcd_endpoints":["%s"]%s}}`, endpoint, extra)
}

func address(t *testing.T, r result) string {
	t.Helper()
	ips, _ := r.stdout["ips"].([]any)
	if !r.ok || len(ips) != 1 {
		t.Fatalf("ADD: %s", r.raw)
	}
	ip := ips[0].(map[string]any)
	if ip["gateway"] != "10.1.0.1" {
		t.Fatalf("gateway: %v", ip)
	}
	return ip["address"].(string)
}

func errorCode(t *testing.T, r result) (float64, string) {
	t.Helper()
	if r.ok {
		t.Fatalf("succeeded: %s", r.raw)
	}
	code, _ := r.stdout["code"].(float64)
	msg, _ := r.stdout["msg"].(string)
	return code, msg
}

func TestTheCNICommands(t *testing.T) {
	srv := testetcd.Start(t)
	cf := conf(srv.Endpoint, "")
	a := call(t, "ADD", "c1", "net1", cf)
	if got := address(t, a); got != "10.1.0.10/24" {
		t.Fatalf("first address %s", got)
	}
	if routes, _ := a.stdout["routes"].([]any); len(routes) != 1 {
		t.Fatalf("routes: %s", a.raw)
	}
	if got := address(t, call(t, "ADD", "c2", "net1", cf)); got != "10.1.0.11/24" {
		t.Fatalf("second address %s", got)
	}
	// A repeated ADD (the runtime retrying) gets the same address.
	if got := address(t, call(t, "ADD", "c1", "net1", cf)); got != "10.1.0.10/24" {
		t.Fatalf("repeated ADD %s", got)
	}
	// CHECK: allocated, and listed in the previous result.
	prev := strings.TrimSuffix(cf, "}") + `,"prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.1.0.10/24","gateway":"10.1.0.1"}]}}`
	if r := call(t, "CHECK", "c1", "net1", prev); !r.ok {
		t.Fatalf("CHECK: %s", r.raw)
	}
	wrong := strings.Replace(prev, `"address":"10.1.0.10/24"`, `"address":"10.1.0.99/24"`, 1)
	if code, msg := errorCode(t, call(t, "CHECK", "c1", "net1", wrong)); code != 7 || !strings.Contains(msg, "does not list") {
		t.Fatalf("CHECK against a wrong prevResult: %v %q", code, msg)
	}
	// DEL twice succeeds; CHECK after DEL names what is missing.
	for range 2 {
		if r := call(t, "DEL", "c1", "net1", cf); !r.ok {
			t.Fatalf("DEL: %s", r.raw)
		}
	}
	if code, msg := errorCode(t, call(t, "CHECK", "c1", "net1", cf)); code != 3 || !strings.Contains(msg, "no address is allocated to container c1 interface net1") {
		t.Fatalf("CHECK after DEL: %v %q", code, msg)
	}
	// GC keeps the valid attachments only (c3 gets the lowest free address, c1's).
	call(t, "ADD", "c3", "net1", cf)
	gc := strings.TrimSuffix(cf, "}") + `,"cni.dev/valid-attachments":[{"containerID":"c3","ifname":"net1"}]}`
	if r := call(t, "GC", "", "", gc); !r.ok || !strings.Contains(r.raw, "gc released 10.1.0.11") {
		t.Fatalf("GC: %s", r.raw)
	}
	// c3 took 10.1.0.10 (freed by c1's DEL), so GC freed c2's 10.1.0.11: the next ADD's.
	if got := address(t, call(t, "ADD", "c4", "net1", cf)); got != "10.1.0.11/24" {
		t.Fatalf("after GC the lowest free is %s", got)
	}
	// STATUS while etcd answers, and VERSION.
	if r := call(t, "STATUS", "", "", cf); !r.ok {
		t.Fatalf("STATUS: %s", r.raw)
	}
	if v := call(t, "VERSION", "", "", cf); !v.ok || !strings.Contains(v.raw, `"1.1.0"`) {
		t.Fatalf("VERSION: %s", v.raw)
	}
	// etcd gone: STATUS says unavailable (50), ADD asks to try again later (11).
	srv.Stop()
	if code, _ := errorCode(t, call(t, "STATUS", "", "", cf)); code != 50 {
		t.Fatalf("STATUS with etcd down: %v", code)
	}
	if code, msg := errorCode(t, call(t, "ADD", "c5", "net1", cf)); code != 11 || !strings.Contains(msg, "etcd") {
		t.Fatalf("ADD with etcd down: %v %q", code, msg)
	}
}

func TestConfigurationErrorsAreCNIErrors(t *testing.T) {
	for _, c := range []struct{ conf, want string }{
		// The CNI library checks these two before the plugin sees them.
		{`{"cniVersion":"1.1.0","name":"blue"`, "unmarshall network config"},
		{`{"cniVersion":"1.1.0","name":"blue","ipam":{"range":"10.1.0.0/24"}}`, "etcd_endpoints is missing"},
		{`{"cniVersion":"1.1.0","name":"blue","ipam":{"range":"10.1.0.0/33","etcd_endpoints":["http://127.0.0.1:1"]}}`, "not an IPv4 CIDR"},
		{`{"cniVersion":"1.1.0","ipam":{"range":"10.1.0.0/24","etcd_endpoints":["http://127.0.0.1:1"]}}`, "missing network name"},
		{`{"cniVersion":"1.1.0","name":"blue","ipam":{"range":"10.1.0.0/24","range_end":"10.1.0.300","etcd_endpoints":["http://127.0.0.1:1"]}}`, "range_end"},
	} {
		code, msg := errorCode(t, call(t, "ADD", "c1", "net1", c.conf))
		if (code != 6 && code != 7) || !strings.Contains(msg, c.want) {
			t.Errorf("%s: code %v %q, want %q", c.conf, code, msg, c.want)
		}
	}
}

// tlsKeys is the `ipam` object's TLS settings for files ca, cert and key.
func tlsKeys(ca, cert, key string) string {
	return fmt.Sprintf(`,"etcd_ca_file":%q,"etcd_cert_file":%q,"etcd_key_file":%q`, ca, cert, key)
}

// Against an etcd that requires client certificates: with the TLS keys the plugin
// allocates; without a certificate etcd refuses it (try again later); a missing file is a
// configuration error naming it.
func TestTheCNICommandsOverTLS(t *testing.T) {
	srv := testetcd.StartTLS(t)
	c := srv.Certs
	good := conf(srv.Endpoint, tlsKeys(c.CA, c.ClientCert, c.ClientKey))
	if a := address(t, call(t, "ADD", "c1", "eth0", good)); a != "10.1.0.10/24" {
		t.Fatalf("ADD over TLS: %s", a)
	}
	if r := call(t, "DEL", "c1", "eth0", good); !r.ok {
		t.Fatalf("DEL over TLS: %s", r.raw)
	}
	noCert := conf(srv.Endpoint, fmt.Sprintf(`,"etcd_ca_file":%q`, c.CA))
	if code, msg := errorCode(t, call(t, "ADD", "c2", "eth0", noCert)); code != 11 {
		t.Fatalf("ADD without a client certificate: code %v: %s", code, msg)
	}
	missing := conf(srv.Endpoint, tlsKeys(c.CA, "/nonexistent/client.pem", c.ClientKey))
	if code, msg := errorCode(t, call(t, "ADD", "c2", "eth0", missing)); code != 7 || !strings.Contains(msg, "/nonexistent/client.pem") {
		t.Fatalf("ADD with a missing certificate: code %v: %s", code, msg)
	}
}
