package compile

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

func testTable() *catalog.Table {
	return &catalog.Table{Name: "t", Columns: []*catalog.Column{
		{Name: "age", Kind: catalog.IntegerRange, Min: 17, Max: 30, Width: 1, Null: catalog.PolicyCell, OutOfDomain: catalog.PolicyClamp},
		{Name: "sex", Kind: catalog.Categorical, Values: []string{"F", "M"}, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyOther},
		{Name: "hours", Kind: catalog.IntegerRange, Min: 0, Max: 49, Width: 10, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
		{Name: "pay", Kind: catalog.Binned, Edges: []float64{0, 10, 20, 50}, Null: catalog.PolicyCell, OutOfDomain: catalog.PolicyOther},
	}}
}

// tri is SQL's three-valued logic: 1 true, 0 false, -1 unknown.
type btri int

func triNot(a btri) btri {
	if a < 0 {
		return a
	}
	return 1 - a
}

// bruteEval evaluates p on the representative value of each column's cell,
// the way SQL would on a row whose values fall in those cells.
func bruteEval(t *catalog.Table, cols []*catalog.Column, cell []int, p parser.Pred) btri {
	value := func(name string) (cat string, num float64, kind catalog.CellKind) {
		for j, c := range cols {
			if c.Name == name {
				ce := c.Cells()[cell[j]]
				return ce.Value, ce.Lo, ce.Kind
			}
		}
		panic("column " + name)
	}
	cmp := func(col string, op parser.CompareOp, lit parser.Literal) btri {
		s, x, kind := value(col)
		if kind == catalog.CellNull || kind == catalog.CellOther {
			return -1
		}
		var c int
		if kind == catalog.CellValue {
			c = strings.Compare(strings.ToLower(s), strings.ToLower(lit.Text))
		} else {
			y, _ := strconv.ParseFloat(lit.Text, 64)
			switch {
			case x < y:
				c = -1
			case x > y:
				c = 1
			}
		}
		ok := map[parser.CompareOp]bool{parser.OpEq: c == 0, parser.OpNe: c != 0, parser.OpLt: c < 0, parser.OpLe: c <= 0, parser.OpGt: c > 0, parser.OpGe: c >= 0}[op]
		if ok {
			return 1
		}
		return 0
	}
	var ev func(p parser.Pred) btri
	ev = func(p parser.Pred) btri {
		switch p := p.(type) {
		case nil:
			return 1
		case parser.Const:
			if p.Value {
				return 1
			}
			return 0
		case parser.Not:
			return triNot(ev(p.Term))
		case parser.And:
			r := btri(1)
			for _, x := range p.Terms {
				v := ev(x)
				if v == 0 {
					return 0
				}
				if v < 0 {
					r = -1
				}
			}
			return r
		case parser.Or:
			r := btri(0)
			for _, x := range p.Terms {
				v := ev(x)
				if v == 1 {
					return 1
				}
				if v < 0 {
					r = -1
				}
			}
			return r
		case parser.Compare:
			return cmp(p.Column, p.Op, p.Value)
		case parser.Between:
			v := ev(parser.And{Terms: []parser.Pred{parser.Compare{Column: p.Column, Op: parser.OpGe, Value: p.Lo}, parser.Compare{Column: p.Column, Op: parser.OpLe, Value: p.Hi}}})
			if p.Negated {
				return triNot(v)
			}
			return v
		case parser.In:
			var terms []parser.Pred
			for _, l := range p.Values {
				terms = append(terms, parser.Compare{Column: p.Column, Op: parser.OpEq, Value: l})
			}
			v := ev(parser.Or{Terms: terms})
			if p.Negated {
				return triNot(v)
			}
			return v
		case parser.IsNull:
			_, _, kind := value(p.Column)
			if (kind == catalog.CellNull) != p.Negated {
				return 1
			}
			return 0
		}
		panic(fmt.Sprintf("%T", p))
	}
	return ev(p)
}

func lit(s string) parser.Literal { return parser.Literal{Text: s} }

func TestTruthTablesMatchBruteForce(t *testing.T) {
	age := func(op parser.CompareOp, v string) parser.Pred {
		return parser.Compare{Column: "age", Op: op, Value: lit(v)}
	}
	sex := func(op parser.CompareOp, v string) parser.Pred {
		return parser.Compare{Column: "sex", Op: op, Value: lit(v)}
	}
	cases := []struct {
		name string
		p    parser.Pred
	}{
		{"eq", age(parser.OpEq, "20")},
		{"ne", age(parser.OpNe, "20")},
		{"lt", age(parser.OpLt, "20")},
		{"le fractional", age(parser.OpLe, "20.5")},
		{"gt", age(parser.OpGt, "25")},
		{"ge", age(parser.OpGe, "25")},
		{"between", parser.Between{Column: "age", Lo: lit("18"), Hi: lit("22")}},
		{"not between", parser.Between{Column: "age", Lo: lit("18"), Hi: lit("22"), Negated: true}},
		{"in", parser.In{Column: "age", Values: []parser.Literal{lit("18"), lit("29")}}},
		{"not in", parser.In{Column: "age", Values: []parser.Literal{lit("18"), lit("29")}, Negated: true}},
		{"is null", parser.IsNull{Column: "age"}},
		{"is not null", parser.IsNull{Column: "pay", Negated: true}},
		{"categorical eq other cell", sex(parser.OpEq, "m")},
		{"categorical ne", sex(parser.OpNe, "F")},
		{"categorical not in", parser.In{Column: "sex", Values: []parser.Literal{lit("F")}, Negated: true}},
		{"hours bin aligned", parser.Compare{Column: "hours", Op: parser.OpGe, Value: lit("20")}},
		{"pay bin aligned", parser.Compare{Column: "pay", Op: parser.OpLt, Value: lit("20")}},
		{"pay last bin closed", parser.Compare{Column: "pay", Op: parser.OpLe, Value: lit("50")}},
		{"and across columns", parser.And{Terms: []parser.Pred{age(parser.OpGt, "20"), sex(parser.OpEq, "M")}}},
		{"or across columns", parser.Or{Terms: []parser.Pred{age(parser.OpGt, "20"), sex(parser.OpEq, "M")}}},
		{"not or", parser.Not{Term: parser.Or{Terms: []parser.Pred{age(parser.OpGt, "20"), sex(parser.OpEq, "M")}}}},
		{"nested", parser.Or{Terms: []parser.Pred{
			parser.And{Terms: []parser.Pred{age(parser.OpLt, "19"), parser.Not{Term: sex(parser.OpEq, "F")}}},
			parser.And{Terms: []parser.Pred{parser.IsNull{Column: "pay"}, parser.Compare{Column: "hours", Op: parser.OpLt, Value: lit("10")}}},
			parser.Not{Term: parser.Between{Column: "age", Lo: lit("17"), Hi: lit("28")}},
		}}},
		{"const false or", parser.Or{Terms: []parser.Pred{parser.Const{Value: false}, age(parser.OpEq, "17")}}},
	}
	tab := testTable()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := &parser.Query{Table: "t", Where: tc.p, Select: []parser.SelectItem{{Agg: parser.AggCount, Alias: "n"}}}
			// Touch every column so the product domain has all four axes.
			q.GroupBy = nil
			w, err := Compile(tab, []*parser.Statement{{Kind: parser.KindAggregate, Query: q}})
			if err != nil {
				t.Fatal(err)
			}
			sizes := w.Sizes()
			cell := make([]int, len(sizes))
			n := w.Cells()
			for i := 0; i < n; i++ {
				got := w.Queries[0].Aggregates[0].Eval(cell)
				want := 0.0
				if bruteEval(tab, w.Columns, cell, tc.p) == 1 {
					want = 1
				}
				if got != want {
					t.Fatalf("cell %v: structured %v, brute force %v", cell, got, want)
				}
				for j := len(sizes) - 1; j >= 0; j-- {
					cell[j]++
					if cell[j] < sizes[j] {
						break
					}
					cell[j] = 0
				}
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	tab := testTable()
	cases := []struct {
		name string
		q    *parser.Query
		code int
		msg  string
	}{
		{"unknown column", &parser.Query{Table: "t", Where: parser.Compare{Column: "nope", Value: lit("1")}}, parser.CodeBadField, "Unknown column 'nope' in 'where clause'"},
		{"splits a bin", &parser.Query{Table: "t", Where: parser.Compare{Column: "hours", Op: parser.OpLt, Value: lit("15")}}, parser.CodeDPRefused, "splits the bin [10, 20)"},
		{"not a number", &parser.Query{Table: "t", Where: parser.Compare{Column: "age", Value: lit("old")}}, parser.CodeDPRefused, "not a number"},
		{"avg categorical", &parser.Query{Table: "t", Select: []parser.SelectItem{{Agg: parser.AggAvg, Column: "sex"}}}, parser.CodeDPRefused, "categorical"},
		{"column not grouped", &parser.Query{Table: "t", Select: []parser.SelectItem{{Column: "age"}, {Agg: parser.AggCount}}}, parser.CodeDPRefused, "GROUP BY"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.q.Select == nil {
				tc.q.Select = []parser.SelectItem{{Agg: parser.AggCount}}
			}
			_, err := Compile(tab, []*parser.Statement{{Kind: parser.KindAggregate, Query: tc.q}})
			perr, ok := err.(*parser.Error)
			if !ok || perr.Code != tc.code || !strings.Contains(perr.Message, tc.msg) {
				t.Fatalf("got %v, want code %d containing %q", err, tc.code, tc.msg)
			}
		})
	}
}

func TestGroupByAndSumWeights(t *testing.T) {
	tab := testTable()
	q := &parser.Query{Table: "t", GroupBy: []string{"sex"}, Select: []parser.SelectItem{
		{Column: "sex", Alias: "sex"}, {Agg: parser.AggCount, Alias: "n"}, {Agg: parser.AggSum, Column: "hours", Alias: "h"}, {Agg: parser.AggAvg, Column: "hours", Alias: "a"},
	}, Where: parser.Compare{Column: "age", Op: parser.OpGe, Value: lit("20")}}
	w, err := Compile(tab, []*parser.Statement{{Kind: parser.KindAggregate, Query: q}})
	if err != nil {
		t.Fatal(err)
	}
	cq := w.Queries[0]
	if got := cq.Groups(w); got != 3 { // F, M, other
		t.Fatalf("groups = %d, want 3", got)
	}
	// SUM(hours) weights are bin midpoints: [0,10) → 4.5, ..., [40,50) → 44.5.
	sum := cq.Aggregates[cq.Items[2].Agg]
	cell := []int{5, 0, 2} // age 22, sex F, hours [20,30)
	if got := sum.Eval(cell); got != 24.5 {
		t.Fatalf("SUM weight = %v, want 24.5", got)
	}
	// hours drops NULLs: AVG(hours) divides by COUNT(hours), which leaves
	// out the rows whose hours are dropped; COUNT(*) counts them, as in
	// MySQL, so the batch measures hours with a dropped cell.
	if cq.Items[3].Kind != ItemRatio || cq.Items[3].Den == cq.Items[1].Agg {
		t.Fatalf("AVG should divide by COUNT(hours), not COUNT(*): %+v", cq.Items[3])
	}
	hours := w.Columns[2]
	drop := hours.DroppedCellIndex()
	if hours.Name != "hours" || drop < 0 {
		t.Fatalf("hours is measured without a dropped cell: %+v", w.Columns)
	}
	cell = []int{5, 0, drop} // age 22, sex F, hours dropped
	if n, den := cq.Aggregates[cq.Items[1].Agg].Eval(cell), cq.Aggregates[cq.Items[3].Den].Eval(cell); n != 1 || den != 0 {
		t.Fatalf("on a dropped hours: COUNT(*) weight %v (want 1), COUNT(hours) %v (want 0)", n, den)
	}
}

// HAVING and ORDER BY on two different unselected aggregates become hidden
// items (this once recursed without end).
func TestHiddenItemsForHavingAndOrder(t *testing.T) {
	q := &parser.Query{Table: "t", GroupBy: []string{"sex"},
		Select:  []parser.SelectItem{{Column: "sex", Alias: "sex"}, {Agg: parser.AggAvg, Column: "hours", Alias: "a"}},
		Having:  parser.AggCompare{Item: parser.SelectItem{Agg: parser.AggCount}, Op: parser.OpGt, Value: 3},
		OrderBy: []parser.OrderItem{{SelectIndex: -1, Agg: parser.AggSum, Column: "hours", Desc: true}},
	}
	w, err := Compile(testTable(), []*parser.Statement{{Kind: parser.KindAggregate, Query: q}})
	if err != nil {
		t.Fatal(err)
	}
	cq := w.Queries[0]
	if cq.Visible != 2 || len(cq.Items) != 4 {
		t.Fatalf("visible %d items %d, want 2 and 4", cq.Visible, len(cq.Items))
	}
	if cq.Order[0].Item != 3 || !cq.Order[0].Desc {
		t.Fatalf("order %+v", cq.Order)
	}
	// The AVG's SUM and COUNT(hours), and COUNT(*) for HAVING, which
	// counts the rows whose hours are dropped too; ORDER BY's SUM(hours) is
	// the AVG's.
	if len(cq.Aggregates) != 3 {
		t.Fatalf("%d aggregates, want 3 (sum, count(hours), count(*))", len(cq.Aggregates))
	}
}
