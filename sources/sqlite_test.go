package sources

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
)

func policyTable() *catalog.Table {
	return &catalog.Table{Name: "t", Source: "main", SourceTable: "t", Columns: []*catalog.Column{
		{Name: "a", Kind: catalog.IntegerRange, Min: 0, Max: 9, Width: 1, Null: catalog.PolicyCell, OutOfDomain: catalog.PolicyClamp},
		{Name: "b", Kind: catalog.Categorical, Values: []string{"x", "y", "z"}, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyOther},
		{Name: "c", Kind: catalog.Binned, Edges: []float64{0, 1.5, 3, 10}, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyDrop},
	}}
}

// The pushed-down histogram bins NULLs and out-of-domain values by each
// column's policy, exactly as a brute-force count does.
func TestHistogramPushdownAppliesPolicies(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "d.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t (a INTEGER, b TEXT, c REAL)`); err != nil {
		t.Fatal(err)
	}
	rows := [][3]any{
		{0, "x", 0.0}, {9, "y", 9.9}, {-5, "z", 1.5}, {15, "Y", 3.0}, {nil, "x", 2.0},
		{3, nil, 1.0}, {4, "w", 10.0}, {5, "x", 10.5}, {5, "x", -1.0}, {7, "z", 2.999},
	}
	for _, r := range rows {
		if _, err := db.Exec(`INSERT INTO t VALUES (?, ?, ?)`, r[0], r[1], r[2]); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	cat := &catalog.Catalog{Sources: map[string]*catalog.Source{"main": {Name: "main", Driver: "sqlite", Path: "d.sqlite"}}}
	h, err := Open(ctx, cat, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tab := policyTable()
	got, err := h.Histogram(ctx, tab, tab.Columns)
	if err != nil {
		t.Fatal(err)
	}
	// Expected cells by the policies: a clamps (NULL → cell 10); b: NULL
	// dropped, unknown → other (3), exact match ("Y" is not "y": other);
	// c: outside [0, 10] dropped, bins [0,1.5) [1.5,3) [3,10].
	type cell struct{ a, b, c int }
	want := map[cell]float64{
		{0, 0, 0}: 1, {9, 1, 2}: 1, {0, 2, 1}: 1, {9, 1, 2 - 0}: 0, {10, 0, 1}: 1,
		{4, 3, 2}: 1, {7, 2, 1}: 1,
	}
	want[cell{9, 1, 2}] = 1 // (9, y, 9.9)
	want[cell{9, 3, 2}] = 1 // (15→9, Y → other, 3.0)
	sizes := []int{11, 4, 3}
	for i, v := range got {
		c := cell{i / (sizes[1] * sizes[2]), (i / sizes[2]) % sizes[1], i % sizes[2]}
		if v != want[c] {
			t.Errorf("cell %+v: got %v, want %v", c, v, want[c])
		}
	}

}
