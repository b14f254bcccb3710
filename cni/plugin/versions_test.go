package plugin

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	types020 "github.com/containernetworking/cni/pkg/types/020"
	types040 "github.com/containernetworking/cni/pkg/types/040"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"veclane.dev/cni/internal/testetcd"
)

// resultOf is the result type of CNI spec version v, and whether its IP configurations name
// their IP version ("version": "4", as 0.3.0 to 0.4.0 have them).
func resultOf(t *testing.T, v string) (types.Result, bool) {
	t.Helper()
	switch {
	case v == "0.1.0" || v == "0.2.0":
		return &types020.Result{}, false
	case strings.HasPrefix(v, "0.3.") || v == "0.4.0":
		return &types040.Result{}, true
	case strings.HasPrefix(v, "1."):
		return &types100.Result{}, false
	}
	t.Fatalf("spec version %s: no result type known for it", v)
	return nil, false
}

// checkResult says whether ADD's stdout is a result of spec version v (its fields and no
// others, its cniVersion) giving the pod a /32 of blue; the result as the current version's.
func checkResult(t *testing.T, v string, out []byte) *types100.Result {
	t.Helper()
	want, ipVersion := resultOf(t, v)
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(want); err != nil {
		t.Fatalf("ADD's result is no %T: %v\n%s", want, err, out)
	}
	if want.Version() != v {
		t.Fatalf("ADD's result says cniVersion %q, want %q", want.Version(), v)
	}
	var ips struct {
		IPs []map[string]any `json:"ips"`
	}
	if err := json.Unmarshal(out, &ips); err != nil {
		t.Fatal(err)
	}
	for _, ip := range ips.IPs {
		if _, has := ip["version"]; has != ipVersion {
			t.Fatalf("an IP configuration of %s with \"version\" %v, want %v: %s", v, has, ipVersion, out)
		}
	}
	r, err := types100.NewResultFromResult(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.IPs) != 1 {
		t.Fatalf("IPs: %s", out)
	}
	if a, _ := netip.AddrFromSlice(r.IPs[0].Address.IP.To4()); !netip.MustParsePrefix("10.1.0.0/24").Contains(a) || r.IPs[0].Address.Mask.String() != "ffffffff" {
		t.Fatalf("address %s, want a /32 of 10.1.0.0/24", r.IPs[0].Address.String())
	}
	return r
}

// ADD, CHECK where the version has it (0.4.0 on) and DEL, twice, at every spec version the
// plugin claims (VERSION's list), through the plugin's binary, with the real daemon and
// etcd: each result is that version's, and DEL leaves nothing behind.
func TestEverySpecVersionItClaims(t *testing.T) {
	needRoot(t)
	etcd := testetcd.Start(t)
	ec := etcd.Client(t)
	d := startDaemon(t, t.TempDir())
	dir := t.TempDir()
	base := writeConf(t, dir, "blue.conf", "blue", "blue", etcd.Endpoint, d.sock(), `{"kind":"tap"}`)
	versions := Versions.SupportedVersions()
	if len(versions) == 0 {
		t.Fatal("the plugin claims no spec version")
	}
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			conf := strings.Replace(base, `"cniVersion":"1.1.0"`, `"cniVersion":"`+v+`"`, 1)
			container := "spec-" + strings.ReplaceAll(v, ".", "-")
			ns := netns(t, container)
			out, err := execPlugin("ADD", container, ns, conf)
			if err != nil {
				t.Fatal(err)
			}
			r := checkResult(t, v, out)
			t.Logf("ADD at %s: %s", v, r.IPs[0].Address.String())
			withCheck, err := version.GreaterThanOrEqualTo(v, "0.4.0")
			if err != nil {
				t.Fatal(err)
			}
			if withCheck {
				prev := strings.TrimSuffix(conf, "}") + `,"prevResult":` + string(out) + `}`
				if _, err := execPlugin("CHECK", container, ns, prev); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				if _, err := execPlugin("DEL", container, ns, conf); err != nil {
					t.Fatal(err)
				}
			}
			for _, i := range d.interfaces(t) {
				if i.Pod != nil {
					t.Fatalf("DEL left %s of %s", i.Name, *i.Pod)
				}
			}
			if n, a := allocated(t, ec, "blue"), attachments(t, ec); n != 0 || len(a) != 0 {
				t.Fatalf("DEL left %d address(es), attachments %+v", n, a)
			}
		})
	}
}
