package plugin

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/internal/testetcd"
)

// The plugin and the IPAM plugin it delegates to, against an etcd that requires client
// certificates: with the TLS keys DEL removes the attachment and releases the address
// (the daemon is away, which DEL allows); without a certificate etcd refuses it (try again
// later); a missing file is a configuration error naming it.
func TestDelOverTLS(t *testing.T) {
	srv := testetcd.StartTLS(t)
	c := srv.Certs
	keys := func(ca, cert, key string) string {
		return fmt.Sprintf(`"etcd_endpoints":[%q],"etcd_ca_file":%q,"etcd_cert_file":%q,"etcd_key_file":%q`, srv.Endpoint, ca, cert, key)
	}
	conf := func(etcd string) string {
		return fmt.Sprintf(`{"cniVersion":"1.1.0","name":"blue","type":"veclane-cni","ctl_socket":"/nonexistent/ctl.sock",%s,
			"ipam":{"type":"veclane-ipam","range":"10.1.0.0/24",%s}}`, etcd, etcd)
	}
	good := conf(keys(c.CA, c.ClientCert, c.ClientKey))
	// An address (the IPAM plugin over TLS), and the attachment ADD would have recorded.
	ipamAdd := exec.Command(filepath.Join(bin, "veclane-ipam"))
	ipamAdd.Env = append(os.Environ(), "CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_IFNAME=eth1", "CNI_NETNS=/var/run/netns/x", "CNI_PATH="+bin)
	ipamAdd.Stdin = strings.NewReader(good)
	if out, err := ipamAdd.CombinedOutput(); err != nil {
		t.Fatalf("veclane-ipam ADD over TLS: %v: %s", err, out)
	}
	ec := srv.Client(t)
	st := cluster.NewStore(ec)
	if err := st.PutAttachment(context.Background(), cluster.PodAttachment{Network: "blue", ContainerID: "c1", IfName: "eth1", Node: "n1", Address: netip.MustParseAddr("10.1.0.1")}); err != nil {
		t.Fatal(err)
	}
	if r, ok := plugin(t, "DEL", "c1", "", conf(keys(c.CA, "", ""))); ok || r["code"] != float64(11) {
		t.Fatalf("DEL without a client certificate: %v", r)
	}
	if r, ok := plugin(t, "DEL", "c1", "", conf(keys("/nonexistent/ca.pem", c.ClientCert, c.ClientKey))); ok || r["code"] != float64(7) || !strings.Contains(fmt.Sprint(r["msg"]), "/nonexistent/ca.pem") {
		t.Fatalf("DEL with a missing CA: %v", r)
	}
	if r, ok := plugin(t, "DEL", "c1", "", good); !ok {
		t.Fatalf("DEL over TLS: %v", r)
	}
	if n := len(attachments(t, ec)); n != 0 {
		t.Fatalf("%d attachment(s) after DEL", n)
	}
	if n := allocated(t, ec, "blue"); n != 0 {
		t.Fatalf("%d address(es) after DEL", n)
	}
}
