package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Node.js with mysql2: the standard flow through query() (text protocol)
// and execute() (server-side prepared statements), ping, a pool, a wrong
// password; against a proxy announcing caching_sha2_password without TLS
// (mysql2 fetches the RSA key), and over required TLS. mysql2 is
// installed by .ci/run with npm into $DPPROXY_CLIENTS_DIR/node (by default
// ~/.cache/dpproxy-clients/node), never into the repository.

func nodeMySQL2(t *testing.T) (node, modules string) {
	t.Helper()
	node, err := exec.LookPath("node")
	needClient(t, "node", err)
	modules = filepath.Join(clientsDir(), "node", "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "mysql2", "package.json")); err != nil {
		needClient(t, "mysql2 (npm install --prefix "+filepath.Join(clientsDir(), "node")+" mysql2)", errors.New("not in "+modules))
	}
	return node, modules
}

func nodeClient(t *testing.T, cp *clientProxy, flow []flowStep) results {
	t.Helper()
	node, modules := nodeMySQL2(t)
	cmd := exec.Command(node, scriptPath(t, "node_mysql2.js"))
	cmd.Env = append(cp.env("analyst", "analyst"), "NODE_PATH="+modules, "DPPROXY_FLOW="+writeFlow(t, flow))
	return runClient(t, cmd)
}

// prefixed returns the results whose step names start with prefix, without it.
func (rs results) prefixed(prefix string) results {
	out := results{}
	for k, v := range rs {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			out[name] = v
		}
	}
	return out
}

func checkNode(t *testing.T, cp *clientProxy, rs results, flow []flowStep) {
	t.Helper()
	text := results{}
	for k, v := range rs {
		if !strings.HasPrefix(k, "prepared_") {
			text[k] = v
		}
	}
	checkStandardFlow(t, cp, text, true)
	checkStandardFlow(t, cp, rs.prefixed("prepared_"), true)
	c := rs.get(t, "connection")
	if c.Info["ping"] != true || c.Info["database"] != "demo" {
		t.Fatalf("connection: %s", c)
	}
	p := rs.get(t, "pool")
	wantOK(t, p)
	if n, _ := p.Info["count"].(string); n == "" {
		t.Fatalf("pool: %s", p)
	}
	wantAccessDenied(t, rs.get(t, "bad_password"), "analyst")
	checkLedger(t, cp, 2*dpSteps(flow)+1)
}

func TestClientsNodeMySQL2CachingSHA2(t *testing.T) {
	t.Parallel()
	nodeMySQL2(t)
	cp := startClientProxy(t, clientOpts{authPlugin: "caching_sha2_password"})
	flow := standardFlow()
	rs := nodeClient(t, cp, flow)
	checkNode(t, cp, rs, flow)
	if rs.get(t, "connection").Info["tls"] != false {
		t.Fatalf("unexpected TLS: %s", rs.get(t, "connection"))
	}
}

func TestClientsNodeMySQL2TLS(t *testing.T) {
	t.Parallel()
	nodeMySQL2(t)
	cp := startClientProxy(t, clientOpts{tls: true, requireTLS: true})
	flow := standardFlow()
	rs := nodeClient(t, cp, flow)
	checkNode(t, cp, rs, flow)
	if c := rs.get(t, "connection"); c.Info["tls"] != true {
		t.Fatalf("not over TLS: %s", c)
	}
}
