package compile

import (
	"errors"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// lookup evaluates a public table's column reached through a join
// (parser.Lookup) on one cell tuple: the column's value in the one public
// row whose key equals the key expression's value there, under MySQL's =
// and collation; NULL when no row matches (a LEFT JOIN's unmatched row);
// for the match indicator (Column ""), 1 or 0. A NULL key joins nothing;
// the other cell's values are unknown, so its lookup is unknown too.
//
// A cell that matches several public rows is refused: the join would count
// each of its protected rows once per matching row, multiplying a row's
// contribution, and dpproxy keeps the sensitivity of a joined query equal
// to that of the same query without the join by joining on unique keys
// only. Keys that match no domain cell may repeat. A key range (a bin of
// several values) that meets some keys but not all splits the cell and is
// refused like any such decision.
func (ev *evaluator) lookup(l parser.Lookup, en env) (val, error) {
	k, err := ev.expr(l.Key, en)
	if err != nil {
		return val{}, err
	}
	switch k.kind {
	case vNull:
		if l.Column == "" {
			return numVal(0, tInt), nil
		}
		return nullVal, nil
	case vOther:
		return val{kind: vOther}, nil
	}
	idx, err := ev.keyIndex(l, en)
	if err != nil {
		return val{}, err
	}
	match := -1
	for _, i := range idx.candidates(ev, k) {
		key := l.Keys[i]
		if key.Null {
			continue
		}
		kv, err := ev.expr(key, en)
		if err != nil {
			return val{}, err
		}
		t, err := ev.compare(k, parser.OpEq, kv)
		if err != nil {
			return val{}, err
		}
		if t != tTrue {
			continue
		}
		if match >= 0 {
			return val{}, parser.Errorf(parser.CodeDPRefused,
				"the join key %s.%s is not unique: rows %d and %d of the public table %s both match %s = %s, so the join would count one protected row several times; dpproxy joins on a key that is unique in the public table: remove the duplicate rows, or join on a unique column",
				l.Alias, l.KeyColumn, match+1, i+1, l.Table, ExprSQL(l.Key), ExprSQL(key))
		}
		match = i
	}
	if l.Column == "" {
		if match < 0 {
			return numVal(0, tInt), nil
		}
		return numVal(1, tInt), nil
	}
	if match < 0 {
		return nullVal, nil
	}
	return ev.expr(l.Values[match], en)
}

// checkJoins refuses a join whose key matches several rows of its public
// table on some cell of the declared domain (see lookup), whether or not
// the query reads the public table's columns: a LEFT JOIN that only counts
// rows still counts a protected row once per matching public row.
func checkJoins(t *catalog.Table, joins []parser.Join) error {
	if len(joins) == 0 {
		return nil
	}
	ev := newEvaluator(t)
	for _, j := range joins {
		var cols []*catalog.Column
		n := 1
		for _, name := range parser.ExprColumns(j.Match.Key) {
			c := t.Column(name)
			if c == nil {
				return parser.Errorf(parser.CodeBadField, "Unknown column '%s' in 'on clause'", name)
			}
			cols = append(cols, c)
			n *= c.Size()
			if n > maxTabulate {
				return parser.Errorf(parser.CodeDPRefused, "the join key %s reads columns whose domains together have more than %d cells; join on one column", ExprSQL(j.Match.Key), maxTabulate)
			}
		}
		cells := make([][]catalog.Cell, len(cols))
		for k, c := range cols {
			cells[k] = c.Cells()
		}
		idx := make([]int, len(cols))
		en := env{}
		for range n {
			for k, c := range cols {
				en[c.Name] = cellVal(c, idx[k], cells[k][idx[k]])
			}
			if _, err := ev.lookup(j.Match, en); err != nil {
				var se *splitError
				if errors.As(err, &se) {
					return parser.Errorf(parser.CodeDPRefused, "the join ON %s = %s.%s is not decidable on the declared domain: a bin of %s holds several values, and whether a row's value matches a key of %s is not known from its bin; join on a categorical column or an integer column of width 1", ExprSQL(j.Match.Key), j.Match.Alias, j.Match.KeyColumn, se.col, j.Match.Table)
				}
				return err
			}
			for k := len(cols) - 1; k >= 0; k-- {
				idx[k]++
				if idx[k] < len(cells[k]) {
					break
				}
				idx[k] = 0
			}
		}
	}
	return nil
}

// keyIndex finds the public rows a key value may equal without comparing
// it with every row, so that a join to a large public table over a large
// domain costs a lookup per cell: string keys by their text folded as the
// collation folds it (two strings are equal exactly when their folds are),
// exact numeric keys by value. A value of another kind (a bin's range, a
// string against numeric keys) is compared with every row.
type keyIndex struct {
	all  []int             // every row
	text map[string][]int  // when every non-NULL key is a string
	num  map[float64][]int // when every non-NULL key is an exact number
}

func (ev *evaluator) keyIndex(l parser.Lookup, en env) (*keyIndex, error) {
	if len(l.Keys) == 0 {
		return &keyIndex{}, nil
	}
	if idx, ok := ev.joinKeys[&l.Keys[0]]; ok {
		return idx, nil
	}
	idx := &keyIndex{all: make([]int, len(l.Keys)), text: map[string][]int{}, num: map[float64][]int{}}
	for i, key := range l.Keys {
		idx.all[i] = i
		if key.Null {
			continue
		}
		kv, err := ev.expr(key, en)
		if err != nil {
			return nil, err
		}
		switch {
		case kv.kind == vStr && idx.text != nil:
			f := ev.co.fold(kv.str)
			idx.text[f] = append(idx.text[f], i)
			idx.num = nil
		case kv.exact() && idx.num != nil:
			idx.num[kv.lo] = append(idx.num[kv.lo], i)
			idx.text = nil
		default:
			idx.text, idx.num = nil, nil
		}
	}
	if ev.joinKeys == nil {
		ev.joinKeys = map[*parser.Value]*keyIndex{}
	}
	ev.joinKeys[&l.Keys[0]] = idx
	return idx, nil
}

// candidates are the rows whose key may equal k (in row order).
func (idx *keyIndex) candidates(ev *evaluator, k val) []int {
	switch {
	case k.kind == vStr && idx.text != nil:
		return idx.text[ev.co.fold(k.str)]
	case k.exact() && idx.num != nil:
		return idx.num[k.lo]
	}
	return idx.all
}
