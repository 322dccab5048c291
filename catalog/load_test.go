package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// valid is a small, valid catalog; the error cases below are edits of it.
const valid = `database: Shop
sources:
  main: {driver: sqlite, path: shop.sqlite}
tables:
  Orders:
    source: main
    source_table: raw_orders
    noise: gaussian
    budget: {total: 10, per_user: 5, default_per_query: 0.1, max_per_query: 1, delta: 1e-9}
    columns:
      Age: {type: integer, min: 17, max: 90, width: 5}
      sex: {type: categorical, values: [Female, Male]}
      amount: {type: numeric, edges: [0, 10.5, 100, 1e4], out_of_domain: other, null: other}
      region: {type: categorical, values: [north, south], null: cell, out_of_domain: other}
      hours: {type: integer, min: 1, max: 99}
users:
  alice: {password: secret, role: analyst}
  Carol: {password_hash: "*2470c0c06dee42fd1618bb99005adca2ec9d1e19", role: auditor}
`

func TestParseValid(t *testing.T) {
	c, err := Parse("shop.yaml", []byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != "shop.yaml" || c.Database != "shop" {
		t.Errorf("path %q database %q", c.Path, c.Database)
	}
	if s := c.Sources["main"]; s == nil || *s != (Source{Name: "main", Driver: "sqlite", Path: "shop.sqlite"}) {
		t.Errorf("source %+v", s)
	}
	tb := c.Table("ORDERS")
	if tb == nil {
		t.Fatal("no table orders")
	}
	if tb.Name != "orders" || tb.Source != "main" || tb.SourceTable != "raw_orders" || tb.Noise != Gaussian {
		t.Errorf("table %+v", tb)
	}
	if want := (Budget{Total: 10, PerUser: 5, DefaultPerQuery: 0.1, MaxPerQuery: 1, Delta: 1e-9, DeltaPerQuery: 1e-9, SelectionShare: DefaultSelectionShare, TopKSelectionShare: DefaultTopKSelectionShare}); tb.Budget != want {
		t.Errorf("budget %+v, want %+v", tb.Budget, want)
	}
	want := []*Column{
		{Name: "age", Kind: IntegerRange, Min: 17, Max: 90, Width: 5, Null: PolicyDrop, OutOfDomain: PolicyClamp},
		{Name: "sex", Kind: Categorical, Values: []string{"Female", "Male"}, Null: PolicyDrop, OutOfDomain: PolicyDrop},
		{Name: "amount", Kind: Binned, Edges: []float64{0, 10.5, 100, 1e4}, Null: PolicyOther, OutOfDomain: PolicyOther},
		{Name: "region", Kind: Categorical, Values: []string{"north", "south"}, Null: PolicyCell, OutOfDomain: PolicyOther},
		{Name: "hours", Kind: IntegerRange, Min: 1, Max: 99, Width: 1, Null: PolicyDrop, OutOfDomain: PolicyClamp},
	}
	if !reflect.DeepEqual(tb.Columns, want) {
		for i, c := range tb.Columns {
			t.Errorf("column %d: %+v", i, *c)
		}
	}
	if got := tb.Column("region").Size(); got != 4 {
		t.Errorf("region size %d, want 4 (2 values, other, NULL)", got)
	}
	wantUsers := []*User{
		{Name: "alice", PasswordHash: NativePasswordHash("secret"), Role: RoleAnalyst},
		{Name: "Carol", PasswordHash: "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19", Role: RoleAuditor},
	}
	if !reflect.DeepEqual(c.Users, wantUsers) {
		t.Errorf("users %+v %+v", *c.Users[0], *c.Users[1])
	}
}

func TestParseDefaults(t *testing.T) {
	c, err := Parse("min.yaml", []byte(`database: d
sources: {s: {driver: SQLite, path: x.db}}
tables:
  t:
    budget: {total: 1, per_user: 1, default_per_query: 1}
    columns: {c: {type: categorical, values: [a]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	tb := c.Tables[0]
	if tb.Source != "s" || tb.SourceTable != "t" || tb.Noise != Laplace || tb.Budget.MaxPerQuery != 0 || len(c.Users) != 0 {
		t.Errorf("defaults: %+v", tb)
	}
	if c.Sources["s"].Driver != "sqlite" {
		t.Errorf("driver %q", c.Sources["s"].Driver)
	}
}

func TestNativePasswordHash(t *testing.T) {
	// SELECT PASSWORD('password') on MySQL 5.7.
	if got, want := NativePasswordHash("password"), "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// edit replaces one occurrence of old in the valid catalog.
func edit(old, new string) string {
	if strings.Count(valid, old) != 1 {
		panic("edit: not unique: " + old)
	}
	return strings.Replace(valid, old, new, 1)
}

func TestParseErrors(t *testing.T) {
	const age = "      Age: {type: integer, min: 17, max: 90, width: 5}"
	const budget = "    budget: {total: 10, per_user: 5, default_per_query: 0.1, max_per_query: 1, delta: 1e-9}"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"width", edit(age, "      Age: {type: integer, min: 17, max: 90, width: 0}"),
			"catalog.yaml:11: tables.orders.columns.age.width: must be ≥ 1"},
		{"min>max", edit(age, "      age: {type: integer, min: 91, max: 90}"),
			"catalog.yaml:11: tables.orders.columns.age.min: must be ≤ max (90)"},
		{"integer float", edit(age, "      age: {type: integer, min: 17.5, max: 90}"),
			`catalog.yaml:11: tables.orders.columns.age.min: must be an integer, not the value "17.5"`},
		{"integer quoted", edit(age, `      age: {type: integer, min: "17", max: 90}`),
			`catalog.yaml:11: tables.orders.columns.age.min: must be an integer, not the value "17"`},
		{"integer huge", edit(age, "      age: {type: integer, min: 1, max: 99999999999999999}"),
			"catalog.yaml:11: tables.orders.columns.age.max: must be an integer between -2^53 and 2^53 (got 99999999999999999)"},
		{"too many cells", edit(age, "      age: {type: integer, min: 0, max: 5000000}"),
			"catalog.yaml:11: tables.orders.columns.age: domain has more than 1000000 bins; use a larger width"},
		{"missing max", edit(age, "      age: {type: integer, min: 17}"),
			"catalog.yaml:11: tables.orders.columns.age.max: required"},
		{"missing type", edit(age, "      age: {min: 17, max: 90}"),
			"catalog.yaml:11: tables.orders.columns.age.type: required"},
		{"bad type", edit(age, "      age: {type: int, min: 17, max: 90}"),
			`catalog.yaml:11: tables.orders.columns.age.type: must be one of integer, numeric, categorical, date, datetime, timestamp, text (got "int")`},
		{"unknown column key", edit(age, "      age: {type: integer, min: 17, max: 90, wdith: 1}"),
			"catalog.yaml:11: tables.orders.columns.age.wdith: unknown key (expected one of type, min, max, width, edges, values, null, out_of_domain, open)"},
		{"key of other type", edit(age, "      age: {type: integer, min: 17, max: 90, values: [a]}"),
			"catalog.yaml:11: tables.orders.columns.age.values: not allowed for type integer"},
		{"column not a mapping", edit(age, "      age: integer"),
			`catalog.yaml:11: tables.orders.columns.age: must be a mapping (key: value, ...), not the value "integer"`},
		{"bad column name", edit(age, "      2age: {type: integer, min: 17, max: 90}"),
			`catalog.yaml:11: tables.orders.columns.2age: invalid name "2age": use up to 64 letters, digits and underscores, not starting with a digit`},
		{"duplicate column after lower-casing", edit("      hours: {type: integer, min: 1, max: 99}", "      AGE: {type: integer, min: 1, max: 99}"),
			"catalog.yaml:15: tables.orders.columns.age: duplicate key (first at line 11)"},
		{"edges too few", edit("edges: [0, 10.5, 100, 1e4]", "edges: [5]"),
			"catalog.yaml:13: tables.orders.columns.amount.edges: must have at least 2 entries (one bin needs two edges)"},
		{"edges not increasing", edit("edges: [0, 10.5, 100, 1e4]", "edges: [0, 100, 100, 1e4]"),
			"catalog.yaml:13: tables.orders.columns.amount.edges[2]: must be greater than the previous edge (100): edges must increase strictly"},
		{"edges not numbers", edit("edges: [0, 10.5, 100, 1e4]", "edges: [0, ten]"),
			`catalog.yaml:13: tables.orders.columns.amount.edges[1]: must be a number, not the value "ten"`},
		{"edges infinite", edit("edges: [0, 10.5, 100, 1e4]", "edges: [0, .inf]"),
			`catalog.yaml:13: tables.orders.columns.amount.edges[1]: must be a finite number (got ".inf")`},
		{"edges missing", edit("amount: {type: numeric, edges: [0, 10.5, 100, 1e4], ", "amount: {type: numeric, "),
			"catalog.yaml:13: tables.orders.columns.amount.edges: required"},
		{"edges not a list", edit("edges: [0, 10.5, 100, 1e4]", "edges: 5"),
			`catalog.yaml:13: tables.orders.columns.amount.edges: must be a list, not the value "5"`},
		{"values empty", edit("values: [Female, Male]", "values: []"),
			"catalog.yaml:12: tables.orders.columns.sex.values: must not be empty"},
		{"values duplicate", edit("values: [Female, Male]", "values: [Female, Male, Female]"),
			`catalog.yaml:12: tables.orders.columns.sex.values[2]: duplicate value "Female" (also values[0])`},
		{"values null", edit("values: [Female, Male]", "values: [Female, ~]"),
			"catalog.yaml:12: tables.orders.columns.sex.values[1]: must not be null (use null: cell to give NULL its own cell)"},
		{"values multi-line", edit("      sex: {type: categorical, values: [Female, Male]}", "      sex:\n        type: categorical\n        values:\n          - Female\n          - [Male]"),
			"catalog.yaml:16: tables.orders.columns.sex.values[1]: must be a single value, not a list"},
		{"other label", edit("values: [north, south]", "values: [north, other]"),
			`catalog.yaml:14: tables.orders.columns.region.values[1]: "other" is the label of the out_of_domain cell; rename the value or use out_of_domain: drop`},
		{"clamp categorical", edit("values: [Female, Male]}", "values: [Female, Male], out_of_domain: clamp}"),
			"catalog.yaml:12: tables.orders.columns.sex.out_of_domain: clamp is only allowed for integer, numeric, date and datetime columns (use drop or other)"},
		{"null clamp", edit("values: [Female, Male]}", "values: [Female, Male], null: clamp}"),
			`catalog.yaml:12: tables.orders.columns.sex.null: must be one of drop, cell, other (got "clamp")`},
		{"null other without other cell", edit("out_of_domain: other, null: other", "null: other"),
			"catalog.yaml:13: tables.orders.columns.amount.null: other requires out_of_domain: other"},
		{"bad policy", edit("out_of_domain: other, null: other", "out_of_domain: nearest"),
			`catalog.yaml:13: tables.orders.columns.amount.out_of_domain: must be one of drop, clamp, other (got "nearest")`},
		{"noise", edit("noise: gaussian", "noise: gauss"),
			`catalog.yaml:8: tables.orders.noise: must be laplace or gaussian (got "gauss")`},
		{"delta missing", edit(budget, "    budget: {total: 10, per_user: 5, default_per_query: 0.1}"),
			"catalog.yaml:9: tables.orders.budget.delta: required when noise is gaussian"},
		{"delta range", edit("delta: 1e-9", "delta: 1"),
			"catalog.yaml:9: tables.orders.budget.delta: must be in (0, 1) (got 1)"},
		{"delta_per_query above delta", edit("delta: 1e-9", "delta: 1e-9, delta_per_query: 1e-8"),
			"catalog.yaml:9: tables.orders.budget.delta_per_query: must be ≤ delta (1e-09)"},
		{"open on a categorical column", edit("sex: {type: categorical, values: [Female, Male]}", "sex: {type: categorical, values: [Female, Male], open: true}"),
			"catalog.yaml:12: tables.orders.columns.sex.open: only integer columns are opened (a text column is open already)"},
		{"values on a text column", edit("sex: {type: categorical, values: [Female, Male]}", "sex: {type: text, values: [Female, Male]}"),
			"catalog.yaml:12: tables.orders.columns.sex.values: not allowed for type text"},
		{"budget not positive", edit("total: 10", "total: 0"),
			"catalog.yaml:9: tables.orders.budget.total: must be > 0"},
		{"budget negative", edit("default_per_query: 0.1", "default_per_query: -0.1"),
			"catalog.yaml:9: tables.orders.budget.default_per_query: must be > 0"},
		{"per_user > total", edit("per_user: 5", "per_user: 50"),
			"catalog.yaml:9: tables.orders.budget.per_user: must be ≤ total (10)"},
		{"default > per_user", edit("default_per_query: 0.1", "default_per_query: 6"),
			"catalog.yaml:9: tables.orders.budget.default_per_query: must be ≤ per_user (5)\n" +
				"catalog.yaml:9: tables.orders.budget.max_per_query: must be ≥ default_per_query (6)"},
		{"max > per_user", edit("max_per_query: 1", "max_per_query: 6"),
			"catalog.yaml:9: tables.orders.budget.max_per_query: must be ≤ per_user (5)"},
		{"budget missing key", edit("total: 10, ", ""),
			"catalog.yaml:9: tables.orders.budget.total: required"},
		{"budget block form", edit(budget, "    budget:\n      total: 10\n      per_user: five\n      default_per_query: 0.1\n      delta: 1e-9"),
			`catalog.yaml:11: tables.orders.budget.per_user: must be a number, not the value "five"`},
		{"budget missing", edit(budget+"\n", ""),
			"catalog.yaml:5: tables.orders.budget: required"},
		{"unknown source", edit("    source: main", "    source: mian"),
			`catalog.yaml:6: tables.orders.source: unknown source "mian" (declared: main)`},
		{"source required with two sources", strings.Replace(edit("    source: main\n", ""), "  main: {driver: sqlite, path: shop.sqlite}", "  main: {driver: sqlite, path: shop.sqlite}\n  other: {driver: sqlite, path: o.sqlite}", 1),
			"catalog.yaml:6: tables.orders.source: required when the catalog declares several sources (main, other)"},
		{"source_table", edit("source_table: raw_orders", "source_table: raw orders"),
			`catalog.yaml:7: tables.orders.source_table: invalid table name "raw orders": use letters, digits and underscores, optionally qualified as schema.table`},
		{"driver", edit("driver: sqlite", "driver: oracle"),
			`catalog.yaml:3: sources.main.driver: must be one of sqlite, postgres, mysql, clickhouse (got "oracle")`},
		{"source path missing", edit("{driver: sqlite, path: shop.sqlite}", "{driver: sqlite}"),
			"catalog.yaml:3: sources.main.path: required"},
		{"no columns", edit("    columns:\n", "    columns: {}\n    x:\n"),
			"catalog.yaml:10: tables.orders.columns: at least one column is required\n" +
				"catalog.yaml:11: tables.orders.x: unknown key (expected one of source, source_table, noise, budget, columns, max_cells, reuse_measurements, private_columns, privacy_unit, shard_key)"},
		{"no tables", strings.Split(valid, "tables:")[0] + "tables: {}\n",
			"catalog.yaml:4: tables: at least one table is required"},
		{"tables empty", strings.Split(valid, "tables:")[0] + "tables:\nusers:\n",
			"catalog.yaml:4: tables: at least one table is required"},
		{"budget empty", edit(budget, "    budget:"),
			"catalog.yaml:9: tables.orders.budget.total: required\n" +
				"catalog.yaml:9: tables.orders.budget.per_user: required\n" +
				"catalog.yaml:9: tables.orders.budget.default_per_query: required\n" +
				"catalog.yaml:9: tables.orders.budget.delta: required when noise is gaussian"},
		{"tables missing", "database: d\nsources: {m: {driver: sqlite, path: p}}\n",
			"catalog.yaml:1: tables: at least one table is required"},
		{"unknown top-level key", "databse: d\n" + strings.SplitN(valid, "\n", 2)[1],
			"catalog.yaml:1: databse: unknown key (expected one of database, sources, tables, public_tables, users, ledger, tls, auth_plugin, server, cache, state)\n" +
				"catalog.yaml:1: database: required"},
		{"role", edit("role: analyst", "role: admin"),
			`catalog.yaml:17: users.alice.role: must be analyst or auditor (got "admin")`},
		{"role missing", edit(", role: analyst", ""),
			"catalog.yaml:17: users.alice.role: required"},
		{"both passwords", edit("{password: secret,", "{password: secret, password_hash: \"*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19\","),
			"catalog.yaml:17: users.alice: give password or password_hash, not both"},
		{"no password", edit("{password: secret, ", "{"),
			"catalog.yaml:17: users.alice: password or password_hash is required"},
		{"empty password", edit("password: secret", `password: ""`),
			"catalog.yaml:17: users.alice.password: must not be empty"},
		{"bad hash", edit("*2470c0c06dee42fd1618bb99005adca2ec9d1e19", "2470c0c06dee42fd1618bb99005adca2ec9d1e19"),
			`catalog.yaml:18: users.Carol.password_hash: must be "*" followed by 40 hex digits (the mysql_native_password hash, as in mysql.user.authentication_string)`},
		{"duplicate user", edit("  Carol:", "  alice:"),
			"catalog.yaml:18: users.alice: duplicate key (first at line 17)"},
		{"syntax", edit("      sex: {type: categorical, values: [Female, Male]}", "      sex: {type: categorical, values: [Female, Male}"),
			"catalog.yaml:12: YAML syntax error: did not find expected ',' or ']'"},
		{"empty", "# nothing\n",
			"catalog.yaml:1: empty file: expected a mapping with database, sources, tables and users"},
		{"not a mapping", "- a\n- b\n",
			"catalog.yaml:1: must be a mapping (key: value, ...), not a list"},
		{"two documents", valid + "---\ndatabase: x\n",
			"catalog.yaml:19: a catalog file holds one YAML document; found a second one"},
		{"syntax in block", "database: d\nsources:\n  m: {driver: sqlite, path: p}\n tables: x\n",
			"catalog.yaml:4: YAML syntax error: did not find expected key"},
		{"tab", "database: d\nsources:\n\tm: {driver: sqlite, path: p}\n",
			"catalog.yaml:3: YAML syntax error: found character that cannot start any token"},
		{"unknown alias", "database: *x\n",
			"catalog.yaml: YAML syntax error: unknown anchor 'x' referenced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("catalog.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error; catalog %+v\n%s", c, tc.yaml)
			}
			if c != nil {
				t.Errorf("catalog returned with error")
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Errorf("error %T is not Errors", err)
			}
			if err.Error() != tc.want {
				t.Errorf("got\n%s\nwant\n%s\nin\n%s", err, tc.want, tc.yaml)
			}
		})
	}
}

func TestParseAliases(t *testing.T) {
	c, err := Parse("a.yaml", []byte(`database: d
sources: {m: {driver: sqlite, path: p}}
tables:
  t1:
    budget: &b {total: 1, per_user: 1, default_per_query: 0.5}
    columns: {c: &col {type: categorical, values: [x, y]}}
  t2:
    budget: *b
    columns: {c: *col, d: *col}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tables) != 2 || c.Tables[1].Budget.DefaultPerQuery != 0.5 || len(c.Tables[1].Columns) != 2 || c.Tables[1].Columns[1].Name != "d" {
		t.Errorf("aliases not resolved: %+v", c.Tables[1])
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(path, []byte(valid), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != path {
		t.Errorf("path %q", c.Path)
	}
	if err := os.WriteFile(path, []byte(edit("width: 5", "width: 0")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || err.Error() != path+":11: tables.orders.columns.age.width: must be ≥ 1" {
		t.Errorf("got %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestDemo(t *testing.T) {
	c := Demo()
	if c.Path != DemoPath || c.Database != "demo" {
		t.Errorf("path %q database %q", c.Path, c.Database)
	}
	if s := c.Sources["main"]; s == nil || s.Driver != "sqlite" || s.Path != "demo.sqlite" {
		t.Errorf("source %+v", s)
	}
	if len(c.Tables) != 3 || c.Table("events") == nil || c.Table("users") == nil {
		t.Fatalf("%d tables", len(c.Tables))
	}
	if ev := c.Table("events"); !ev.IsUnitColumn("user_id") || ev.Unit.MaxRows != 5 || ev.Column("user_id") != nil {
		t.Errorf("events: user_id must be the privacy unit, not a domain column: %+v", ev)
	}
	if ev, us := c.Table("events"), c.Table("users"); ev.Space() != "customer" || us.Space() != "customer" || c.Table("adult").Space() != "adult" {
		t.Errorf("spaces: events %s, users %s, adult %s", ev.Space(), us.Space(), c.Table("adult").Space())
	}
	if pt := c.PublicTable("countries"); pt == nil || len(pt.Rows) != 20 || pt.Column("region") != 2 {
		t.Errorf("public table countries: %+v", pt)
	}
	tb := c.Table("adult")
	if tb == nil || tb.Source != "main" || tb.SourceTable != "adult" || tb.Noise != Laplace {
		t.Fatalf("table %+v", tb)
	}
	if want := (Budget{Total: 100, PerUser: 20, DefaultPerQuery: 0.1, MaxPerQuery: 2, Delta: DefaultDelta, DeltaPerQuery: DefaultDeltaPerQuery, SelectionShare: DefaultSelectionShare, TopKSelectionShare: DefaultTopKSelectionShare}); tb.Budget != want {
		t.Errorf("budget %+v", tb.Budget)
	}
	cat := func(vs ...string) *Column {
		return &Column{Kind: Categorical, Values: vs, Null: PolicyDrop, OutOfDomain: PolicyDrop}
	}
	rng := func(lo, hi int64) *Column {
		return &Column{Kind: IntegerRange, Min: lo, Max: hi, Width: 1, Null: PolicyDrop, OutOfDomain: PolicyClamp}
	}
	want := []struct {
		name string
		col  *Column
	}{
		{"age", rng(17, 90)},
		{"workclass", cat("Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov", "Without-pay", "Never-worked")},
		{"education", cat("Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th", "HS-grad", "Some-college",
			"Assoc-voc", "Assoc-acdm", "Bachelors", "Masters", "Prof-school", "Doctorate")},
		{"marital_status", cat("Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed", "Married-spouse-absent", "Married-AF-spouse")},
		{"occupation", cat("Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty", "Handlers-cleaners",
			"Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv", "Armed-Forces")},
		{"race", cat("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black")},
		{"sex", cat("Female", "Male")},
		{"hours_per_week", rng(1, 99)},
		{"income", cat("<=50K", ">50K")},
	}
	if len(tb.Columns) != len(want) {
		t.Fatalf("%d columns, want %d", len(tb.Columns), len(want))
	}
	for i, w := range want {
		w.col.Name = w.name
		if !reflect.DeepEqual(tb.Columns[i], w.col) {
			t.Errorf("column %d: got %+v, want %+v", i, *tb.Columns[i], *w.col)
		}
	}
	users := map[string]Role{"analyst": RoleAnalyst, "auditor": RoleAuditor, "bob": RoleAnalyst}
	if len(c.Users) != len(users) {
		t.Errorf("%d users", len(c.Users))
	}
	for name, role := range users {
		u := c.User(name)
		if u == nil || u.Role != role || u.PasswordHash != NativePasswordHash(name) {
			t.Errorf("user %s: %+v", name, u)
		}
	}
	// Each call is a fresh copy.
	c.Tables[0].Name = "changed"
	if Demo().Tables[0].Name != "adult" {
		t.Error("Demo returns shared state")
	}
}

func TestIssue4Settings(t *testing.T) {
	c, err := Parse("c.yaml", []byte(`
database: d
sources: {main: {driver: sqlite, path: x.sqlite}}
tables:
  t:
    budget: {total: 10, per_user: 5, default_per_query: 0.1, topk_selection_share: 0.25}
    columns: {a: {type: integer, min: 0, max: 9}}
users:
  u: {password: p, role: analyst, default_epsilon: 0.2, max_epsilon: 0.5}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Table("t").Budget.TopKSelectionShare; got != 0.25 {
		t.Fatalf("share %v", got)
	}
	if u := c.User("u"); u.DefaultEpsilon != 0.2 || u.MaxEpsilon != 0.5 {
		t.Fatalf("user %+v", u)
	}
	_, err = Parse("c.yaml", []byte(`
database: d
sources: {main: {driver: sqlite, path: x.sqlite}}
tables:
  t:
    budget: {total: 10, per_user: 5, default_per_query: 0.1, topk_selection_share: 1.5}
    columns: {a: {type: integer, min: 0, max: 9}}
`))
	if err == nil || !strings.Contains(err.Error(), "c.yaml:6: tables.t.budget.topk_selection_share: must be in (0, 1)") {
		t.Fatalf("got %v", err)
	}
}

func TestTLSAndAuthPlugin(t *testing.T) {
	base := "database: d\nsources: {main: {driver: sqlite, path: x.sqlite}}\ntables:\n  t:\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n    columns: {a: {type: integer, min: 0, max: 9}}\n"
	c, err := Parse("c.yaml", []byte(base+"tls: {cert: c.pem, key: k.pem, require: true}\nauth_plugin: caching_sha2_password\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS != (TLS{Cert: "c.pem", Key: "k.pem", Require: true}) || c.AuthPlugin != "caching_sha2_password" {
		t.Fatalf("%+v %q", c.TLS, c.AuthPlugin)
	}
	for _, bad := range []struct{ yaml, msg string }{
		{"tls: {cert: c.pem}\n", "c.yaml:7: tls: give cert and key together"},
		{"tls: {require: true}\n", "c.yaml:7: tls.require: require: true needs a cert and key"},
		{"auth_plugin: sha256\n", "c.yaml:7: auth_plugin:"},
	} {
		if _, err := Parse("c.yaml", []byte(base+bad.yaml)); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%q: got %v, want %q", bad.yaml, err, bad.msg)
		}
	}
}

func TestServerSection(t *testing.T) {
	base := "database: d\nsources: {main: {driver: sqlite, path: x.sqlite}}\ntables:\n  t:\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n    columns: {a: {type: integer, min: 0, max: 9}}\n"
	c, err := Parse("c.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	want := Server{MaxConnections: 151, MaxUserConnections: 100, MaxUnauthenticated: 256, MaxUnauthenticatedPerHost: 64,
		HandshakeTimeout: 10 * time.Second, WaitTimeout: 8 * time.Hour, InteractiveTimeout: 8 * time.Hour}
	if c.Server != want {
		t.Fatalf("defaults: %+v, want %+v", c.Server, want)
	}
	if d := Demo().Server; d != want {
		t.Fatalf("demo: %+v", d)
	}
	c, err = Parse("c.yaml", []byte(base+"server: {max_connections: 20, handshake_timeout: 5s, wait_timeout: 600, interactive_timeout: 1h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = Server{MaxConnections: 20, MaxUserConnections: 13, MaxUnauthenticated: 256, MaxUnauthenticatedPerHost: 64,
		HandshakeTimeout: 5 * time.Second, WaitTimeout: 10 * time.Minute, InteractiveTimeout: time.Hour}
	if c.Server != want {
		t.Fatalf("%+v, want %+v", c.Server, want)
	}
	c, err = Parse("c.yaml", []byte(base+"server: {max_connections: 40, max_user_connections: 40, max_unauthenticated: 10, max_unauthenticated_per_host: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Server; s.MaxConnections != 40 || s.MaxUserConnections != 40 || s.MaxUnauthenticated != 10 || s.MaxUnauthenticatedPerHost != 3 {
		t.Fatalf("%+v", s)
	}
	// The per-address cap follows a smaller max_unauthenticated; one user's
	// default stays below max_connections.
	c, err = Parse("c.yaml", []byte(base+"server: {max_connections: 2, max_unauthenticated: 10}\n"))
	if err != nil || c.Server.MaxUnauthenticatedPerHost != 10 || c.Server.MaxUserConnections != 1 {
		t.Fatalf("%v %+v", err, c.Server)
	}
	// A user's own max_user_connections, up to max_connections.
	users := "users:\n  a: {password: p, role: analyst, max_user_connections: 150}\n  b: {password: p, role: analyst}\n"
	c, err = Parse("c.yaml", []byte(base+users))
	if err != nil || c.User("a").MaxUserConnections != 150 || c.User("b").MaxUserConnections != 0 {
		t.Fatalf("%v %+v", err, c)
	}
	// Only some keys: the others keep their defaults.
	c, err = Parse("c.yaml", []byte(base+"server:\n  wait_timeout: 30\n"))
	if err != nil || c.Server.WaitTimeout != 30*time.Second || c.Server.MaxConnections != 151 || c.Server.InteractiveTimeout != 8*time.Hour {
		t.Fatalf("%v %+v", err, c)
	}
	for _, bad := range []struct{ yaml, msg string }{
		{"server: {max_connections: 0}\n", "c.yaml:7: server.max_connections: must be between 1 and 100000 (got 0)"},
		{"server: {max_connections: many}\n", "c.yaml:7: server.max_connections: must be an integer"},
		{"server: {handshake_timeout: 1}\n", "c.yaml:7: server.handshake_timeout: must be between 2 and 31536000 seconds (got \"1\")"},
		{"server: {wait_timeout: 1.5s}\n", "c.yaml:7: server.wait_timeout: must be a whole number of seconds (got \"1.5s\")"},
		{"server: {wait_timeout: 0}\n", "c.yaml:7: server.wait_timeout: must be between 1 and 31536000 seconds"},
		{"server: {interactive_timeout: forever}\n", "c.yaml:7: server.interactive_timeout: must be a number of seconds or a duration such as 30s, 10m, 8h (got \"forever\")"},
		{"server: {interactive_timeout: 9000h}\n", "c.yaml:7: server.interactive_timeout: must be between 1 and 31536000 seconds"},
		{"server:\n  max_conections: 5\n", "c.yaml:8: server.max_conections: unknown key (expected one of max_connections, max_user_connections, max_unauthenticated, max_unauthenticated_per_host, handshake_timeout, wait_timeout, interactive_timeout)"},
		{"server: {max_user_connections: 152}\n", "c.yaml:7: server.max_user_connections: must be between 1 and max_connections = 151 (got 152)"},
		{"server: {max_connections: 10, max_user_connections: 11}\n", "c.yaml:7: server.max_user_connections: must be between 1 and max_connections = 10 (got 11)"},
		{"server: {max_unauthenticated: 0}\n", "c.yaml:7: server.max_unauthenticated: must be between 1 and 100000 (got 0)"},
		{"server: {max_unauthenticated: 8, max_unauthenticated_per_host: 9}\n", "c.yaml:7: server.max_unauthenticated_per_host: must be between 1 and max_unauthenticated = 8 (got 9)"},
		{"server: {max_connections: 5}\nusers: {a: {password: p, role: analyst, max_user_connections: 6}}\n", "c.yaml:8: users.a.max_user_connections: must be between 1 and max_connections = 5 (got 6)"},
		{"users: {a: {password: p, role: auditor, max_user_connections: 0}}\n", "c.yaml:7: users.a.max_user_connections: must be between 1 and max_connections = 151 (got 0)"},
		{"server: 5\n", "c.yaml:7: server: must be a mapping"},
	} {
		if _, err := Parse("c.yaml", []byte(base+bad.yaml)); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%q: got %v, want %q", bad.yaml, err, bad.msg)
		}
	}
}
