package testdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ClickHouseShards is how many server processes StartClickHouse runs: one
// per shard of its cluster.
const ClickHouseShards = 3

// ClickHouseCluster is the name of the cluster StartClickHouse declares in
// every node's remote_servers: ClickHouseShards shards of one replica each,
// node i being shard i+1, so a Distributed table sharded by an integer
// expression e puts a row on node e % ClickHouseShards.
const ClickHouseCluster = "dpproxy"

// clickhousePassword is the default user's password (in every node's
// users.xml, so the nodes also use it to query each other).
const clickhousePassword = "dpproxy-test"

// StartClickHouse starts a three-shard ClickHouse cluster on this machine:
// three clickhouse-server processes (Debian's clickhouse-server), each in
// its own directory under one temporary directory with its own generated
// config, on free loopback ports, run as the clickhouse user when this
// process is root. Every node's remote_servers declares the cluster
// ClickHouseCluster over the three, so a Distributed table created on node
// 0 over a local table created on each node reads all three. The returned
// Server's AdminDSN is node 0's (the Distributed tables' initiator), Shards
// every node's, in shard order; Driver is "clickhouse" (the caller imports
// github.com/ClickHouse/clickhouse-go/v2).
func StartClickHouse(ctx context.Context) (*Server, error) {
	bin, err := exec.LookPath("clickhouse-server")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/clickhouse-server"); err != nil {
			return nil, fmt.Errorf("clickhouse: clickhouse-server: %w", ErrMissing)
		}
	}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("runuser"); err != nil {
			return nil, fmt.Errorf("clickhouse: runuser: %w", ErrMissing)
		}
	}
	dir, err := tempDir("dpproxy-ch-")
	if err != nil {
		return nil, err
	}
	// Three distinct free ports (FreePort may hand the same one twice).
	var ports []int
	for len(ports) < ClickHouseShards {
		p, err := FreePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	var remote strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&remote, "<shard><replica><host>127.0.0.1</host><port>%d</port><user>default</user><password>%s</password></replica></shard>", p, clickhousePassword)
	}
	s := &Server{Kind: "clickhouse", Host: "127.0.0.1", Port: ports[0], Driver: "clickhouse", dir: dir}
	type node struct {
		cmd    *exec.Cmd
		exited chan error
		log    string
	}
	var nodes []*node
	s.stop = func() error {
		for _, n := range nodes {
			if n.cmd.Process != nil {
				n.cmd.Process.Signal(syscall.SIGTERM)
			}
		}
		for _, n := range nodes {
			select {
			case <-n.exited:
			case <-time.After(30 * time.Second):
				n.cmd.Process.Kill()
				<-n.exited
			}
		}
		return nil
	}
	fail := func(err error) (*Server, error) {
		s.Stop()
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	for i, port := range ports {
		nd := filepath.Join(dir, "node"+strconv.Itoa(i))
		for _, sub := range []string{"data", "tmp", "user_files", "format_schemas", "log"} {
			if err := os.MkdirAll(filepath.Join(nd, sub), 0o755); err != nil {
				return fail(err)
			}
		}
		cfg := fmt.Sprintf(clickhouseConfig, filepath.Join(nd, "log"), port, nd, remote.String(), ClickHouseCluster)
		if err := os.WriteFile(filepath.Join(nd, "config.xml"), []byte(cfg), 0o644); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(filepath.Join(nd, "users.xml"), []byte(fmt.Sprintf(clickhouseUsers, clickhousePassword)), 0o644); err != nil {
			return fail(err)
		}
		if err := chown(dir, "clickhouse"); err != nil {
			return fail(err)
		}
		n := &node{cmd: asUser("clickhouse", bin, "--config-file="+filepath.Join(nd, "config.xml")), exited: make(chan error, 1),
			log: filepath.Join(nd, "log", "server.err.log")}
		n.cmd.Dir = nd
		detach(n.cmd)
		if err := n.cmd.Start(); err != nil {
			return fail(err)
		}
		nodes = append(nodes, n)
		go func() { n.exited <- n.cmd.Wait() }()
		s.Shards = append(s.Shards, fmt.Sprintf("clickhouse://default:%s@127.0.0.1:%d/default?dial_timeout=5s", clickhousePassword, port))
	}
	s.AdminDSN = s.Shards[0]
	for i, n := range nodes {
		if err := waitReady(ctx, s.Driver, s.Shards[i], n.exited, n.log); err != nil {
			return fail(fmt.Errorf("node %d: %w", i, err))
		}
	}
	return s, nil
}

// ExecShards runs statements as the superuser on every node of a
// ClickHouse cluster, in shard order.
func (s *Server) ExecShards(ctx context.Context, stmts ...string) error {
	if len(s.Shards) == 0 {
		return errors.New("not a cluster")
	}
	for i, dsn := range s.Shards {
		db, err := sql.Open(s.Driver, dsn)
		if err != nil {
			return err
		}
		for _, st := range stmts {
			if _, err := db.ExecContext(ctx, st); err != nil {
				db.Close()
				return fmt.Errorf("node %d: %s: %w", i, firstLine(st), err)
			}
		}
		db.Close()
	}
	return nil
}

// clickhouseConfig is one node's config.xml: log directory, TCP port, node
// directory, the cluster's shards and the cluster's name. No HTTP port
// (dpproxy speaks the native protocol), small caches (a test server), the
// server's time zone not UTC so that tests see UTC comes from the queries.
const clickhouseConfig = `<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>%[1]s/server.log</log>
    <errorlog>%[1]s/server.err.log</errorlog>
    <size>10M</size>
    <count>1</count>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>%[2]d</tcp_port>
  <max_connections>512</max_connections>
  <max_concurrent_queries>100</max_concurrent_queries>
  <uncompressed_cache_size>268435456</uncompressed_cache_size>
  <mark_cache_size>268435456</mark_cache_size>
  <path>%[3]s/data/</path>
  <tmp_path>%[3]s/tmp/</tmp_path>
  <user_files_path>%[3]s/user_files/</user_files_path>
  <format_schema_path>%[3]s/format_schemas/</format_schema_path>
  <users_config>%[3]s/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>Asia/Kolkata</timezone>
  <mlock_executable>false</mlock_executable>
  <remote_servers>
    <%[5]s>%[4]s</%[5]s>
  </remote_servers>
  <builtin_dictionaries_reload_interval>3600</builtin_dictionaries_reload_interval>
  <max_session_timeout>3600</max_session_timeout>
  <default_session_timeout>60</default_session_timeout>
</yandex>
`

// clickhouseUsers is every node's users.xml: the default user, with a
// password, from the loopback interface only.
const clickhouseUsers = `<?xml version="1.0"?>
<yandex>
  <profiles>
    <default>
      <max_memory_usage>4000000000</max_memory_usage>
      <load_balancing>in_order</load_balancing>
    </default>
  </profiles>
  <users>
    <default>
      <password>%s</password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`
