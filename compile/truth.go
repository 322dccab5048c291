package compile

import (
	"slices"

	"github.com/dpproxy/dpproxy/parser"
)

// truth returns the predicate's truth table: 1 where SQL's three-valued
// WHERE evaluates to TRUE, 0 where FALSE or UNKNOWN.
func (c *compiler) truth(p parser.Pred) (Linear, error) {
	tr, _, err := c.tv(p)
	if se, ok := err.(*splitError); ok {
		return nil, c.explainSplit(se.what, se)
	}
	if err != nil {
		return nil, err
	}
	if len(tr) > maxTerms {
		return nil, tooComplex()
	}
	return tr, nil
}

func tooComplex() error {
	return parser.Errorf(parser.CodeDPRefused, "the WHERE clause is too complex (more than %d product terms across columns); split it into simpler queries", maxTerms)
}

// tv returns the TRUE and FALSE indicator tables of p. UNKNOWN (from NULL
// and out-of-domain cells) is neither, so NOT swaps them as SQL does.
// AND, OR and NOT combine the tables of their terms structurally, so a
// conjunction over columns stays a Kronecker product; each atom is
// evaluated on the cells of the columns it reads.
func (c *compiler) tv(p parser.Pred) (Linear, Linear, error) {
	d := len(c.w.Columns)
	switch p := p.(type) {
	case nil:
		return ones(d), nil, nil
	case parser.Const:
		if p.Value {
			return ones(d), nil, nil
		}
		return nil, ones(d), nil
	case parser.Not:
		t, f, err := c.tv(p.Term)
		return f, t, err
	case parser.And, parser.Or:
		var terms []parser.Pred
		isAnd := false
		switch p := p.(type) {
		case parser.And:
			terms, isAnd = p.Terms, true
		case parser.Or:
			terms = p.Terms
		}
		if len(terms) == 0 {
			return ones(d), nil, nil
		}
		// A term that splits a bin may not matter to the whole (FALSE AND
		// x, TRUE OR x): then the whole is evaluated on its columns' cells.
		whole := func(err error) (Linear, Linear, error) {
			if _, split := err.(*splitError); !split {
				return nil, nil, err
			}
			if t, f, err2 := c.atomTV(p); err2 == nil {
				return t, f, nil
			}
			return nil, nil, err
		}
		accT, accF, err := c.tv(terms[0])
		if err != nil {
			return whole(err)
		}
		for _, x := range terms[1:] {
			t, f, err := c.tv(x)
			if err != nil {
				return whole(err)
			}
			if isAnd { // T = T1·T2, F = F1 ∨ F2
				accT, accF = Mul(accT, t), or(accF, f)
			} else { // T = T1 ∨ T2, F = F1·F2
				accT, accF = or(accT, t), Mul(accF, f)
			}
			if len(accT) > maxTerms || len(accF) > maxTerms {
				return nil, nil, tooComplex()
			}
		}
		return accT, accF, nil
	case parser.AggCompare:
		return nil, nil, parser.Errorf(parser.CodeDPRefused, "aggregates belong in HAVING, not WHERE")
	}
	return c.atomTV(p)
}

// atomTV evaluates p on every cell tuple of the columns it reads. A split
// bin is a raw *splitError, explained by truth.
func (c *compiler) atomTV(p parser.Pred) (Linear, Linear, error) {
	cols, err := c.axes(parser.PredColumns(p), "where clause")
	if err != nil {
		return nil, nil, err
	}
	general, err := c.ev.normalize(p)
	if err != nil {
		return nil, nil, err
	}
	vals, err := c.tabulate(cols, "", func(en env) (float64, error) {
		t, err := c.ev.predOnPieces(general, en)
		switch {
		case err != nil:
			return 0, err
		case t == tTrue:
			return 1, nil
		case t == tFalse:
			return -1, nil
		}
		return 0, nil
	})
	if err != nil {
		if se, ok := err.(*splitError); ok && se.what == "" {
			se.what = PredSQL(p)
		}
		return nil, nil, err
	}
	tVals, fVals := make([]float64, len(vals)), make([]float64, len(vals))
	for i, v := range vals {
		switch v {
		case 1:
			tVals[i] = 1
		case -1:
			fVals[i] = 1
		}
	}
	t, err := c.toLinear(cols, tVals)
	if err != nil {
		return nil, nil, err
	}
	f, err := c.toLinear(cols, fVals)
	return t, f, err
}

// axes maps column names to batch axes, sorted.
func (c *compiler) axes(names []string, clause string) ([]int, error) {
	var out []int
	for _, n := range names {
		j, ok := c.index[n]
		if !ok {
			return nil, parser.Errorf(parser.CodeBadField, "Unknown column '%s' in '%s'", n, clause)
		}
		out = append(out, j)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// or is a ∨ b = a + b − a·b for 0/1 tables.
func or(a, b Linear) Linear {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return AddScaled(AddScaled(a, 1, b), -1, Mul(a, b))
}
