package catalog

import "strings"

// A table of tables: its source, noise, budget, privacy unit and columns.

func (p *yamlReader) table(e entry, sources []string) *Table {
	nameOK := p.name(e.val, e.key)
	f, ok := p.fields(e.val, "source", "source_table", "noise", "budget", "columns", "max_cells", "reuse_measurements", "private_columns", "privacy_unit", "shard_key")
	if !ok {
		return nil
	}
	t := &Table{Name: e.key, SourceTable: e.key, Noise: Laplace, MaxCells: DefaultMaxCells}
	if n, ok := f["reuse_measurements"]; ok {
		if w, ok := p.word(n, "true", "false"); ok {
			t.NoMeasurementReuse = w == "false"
		}
	}
	if n, ok := f["max_cells"]; ok {
		if v, ok := p.integer(n); ok {
			if v < 1 {
				p.errorf(n.line, n.path, "must be ≥ 1")
			} else {
				t.MaxCells = v
			}
		}
	}

	if n, ok := f["source"]; ok {
		if s, ok := p.scalar(n); ok {
			t.Source = strings.ToLower(s)
			known := sources == nil
			for _, name := range sources {
				known = known || name == t.Source
			}
			if !known {
				p.errorf(n.line, n.path, "unknown source %q (declared: %s)", s, strings.Join(sources, ", "))
			}
		}
	} else if len(sources) == 1 {
		t.Source = sources[0]
	} else if len(sources) > 1 {
		p.errorf(e.val.line, join(e.val.path, "source"), "required when the catalog declares several sources (%s)", strings.Join(sources, ", "))
	}

	if n, ok := f["source_table"]; ok {
		if s, ok := p.scalar(n); ok {
			if !sourceTable.MatchString(s) {
				p.errorf(n.line, n.path, "invalid table name %q: use letters, digits and underscores, optionally qualified as schema.table", s)
			}
			t.SourceTable = s
		}
	}

	noiseOK := true
	if n, ok := f["noise"]; ok {
		var w string
		if w, noiseOK = p.word(n, string(Laplace), string(Gaussian)); noiseOK {
			t.Noise = NoiseFamily(w)
		}
	}

	if n, ok := f["budget"]; !ok {
		p.required(e.val, "budget")
	} else {
		t.Budget = p.budget(n, t.Noise, noiseOK)
	}

	if n, ok := f["columns"]; !ok {
		p.required(e.val, "columns")
	} else if es, ok := p.entries(n, true); ok {
		if len(es) == 0 {
			p.errorf(n.line, n.path, "at least one column is required")
		}
		for _, ce := range es {
			if c := p.column(ce); c != nil {
				t.Columns = append(t.Columns, c)
			}
		}
	}
	if n, ok := f["private_columns"]; ok {
		p.privateColumns(n, t)
	}
	if n, ok := f["privacy_unit"]; ok {
		t.Unit = p.privacyUnit(n, t)
	}
	if n, ok := f["shard_key"]; ok {
		if s, ok := p.scalar(n); ok && p.name(n, strings.ToLower(s)) {
			t.ShardKey = strings.ToLower(s)
		}
	}
	if p.spaceNodes == nil {
		p.spaceNodes = map[*Table]node{}
	}
	if _, ok := p.spaceNodes[t]; !ok {
		p.spaceNodes[t] = e.val
	}
	if !nameOK {
		return nil
	}
	return t
}

// privacyUnit reads a table's privacy_unit: {column, space, max_rows,
// max_groups, max_rows_per_group}. The column must not be a domain column;
// max_rows is required (bounds are declared, never learned from the data).
func (p *yamlReader) privacyUnit(n node, t *Table) *PrivacyUnit {
	f, ok := p.fields(n, "column", "space", "max_rows", "max_groups", "max_rows_per_group")
	if !ok {
		return nil
	}
	u := &PrivacyUnit{}
	good := true
	if sn, ok := f["space"]; ok {
		if s, ok := p.scalar(sn); !ok {
			good = false
		} else if u.Space = strings.ToLower(s); !p.name(sn, u.Space) {
			good = false
		} else {
			if p.spaceNodes == nil {
				p.spaceNodes = map[*Table]node{}
			}
			p.spaceNodes[t] = sn
		}
	}
	if cn, ok := f["column"]; !ok {
		p.required(n, "column")
		good = false
	} else if s, ok := p.scalar(cn); !ok {
		good = false
	} else {
		u.Column = strings.ToLower(s)
		if !p.name(cn, u.Column) {
			good = false
		} else if t.Column(u.Column) != nil {
			p.errorf(cn.line, cn.path, "%q is a domain column of table %s: the privacy unit column is never a domain column (remove it from columns)", s, t.Name)
			good = false
		} else if t.IsPrivate(u.Column) {
			p.errorf(cn.line, cn.path, "%q is listed in private_columns of table %s: the privacy unit column is private already, and COUNT(DISTINCT %s) counts it (remove it from private_columns)", s, t.Name, u.Column)
			good = false
		}
	}
	bound := func(key string, required bool) (int64, node, bool) {
		bn, has := f[key]
		if !has {
			if required {
				p.errorf(n.line, join(n.path, key), "required: the most rows one unit keeps (declare it; dpproxy never learns it from the data — dpproxy profile-units shows the data owner the distribution)")
			}
			return 0, bn, !required
		}
		v, ok := p.integer(bn)
		if !ok {
			return 0, bn, false
		}
		if v < 1 || v > MaxUnitRows {
			p.errorf(bn.line, bn.path, "must be between 1 and %d (got %d)", MaxUnitRows, v)
			return 0, bn, false
		}
		return v, bn, true
	}
	k, _, kOK := bound("max_rows", true)
	g, gn, gOK := bound("max_groups", false)
	r, rn, rOK := bound("max_rows_per_group", false)
	if kOK && gOK && g > k {
		p.errorf(gn.line, gn.path, "must be ≤ max_rows (%d): a unit keeping at most %d rows touches at most %d cells", k, k, k)
		gOK = false
	}
	if kOK && rOK && r > k {
		p.errorf(rn.line, rn.path, "must be ≤ max_rows (%d)", k)
		rOK = false
	}
	if !good || !kOK || !gOK || !rOK {
		return nil
	}
	u.MaxRows, u.MaxGroups, u.MaxRowsPerGroup = k, g, r
	return u
}

func (p *yamlReader) budget(n node, noise NoiseFamily, noiseOK bool) Budget {
	var b Budget
	f, ok := p.fields(n, "total", "per_user", "default_per_query", "max_per_query", "delta", "delta_per_query", "topk_selection_share", "selection_share")
	if !ok {
		return b
	}
	get := func(key string, required bool) (float64, node, bool) {
		v, ok := f[key]
		if !ok {
			if required {
				p.required(n, key)
			}
			return 0, v, false
		}
		x, ok := p.positive(v)
		return x, v, ok
	}
	total, _, totalOK := get("total", true)
	perUser, perUserN, perUserOK := get("per_user", true)
	def, defN, defOK := get("default_per_query", true)
	maxQ, maxN, maxOK := get("max_per_query", false)
	b.Total, b.PerUser, b.DefaultPerQuery, b.MaxPerQuery = total, perUser, def, maxQ
	b.TopKSelectionShare = DefaultTopKSelectionShare
	if sn, has := f["topk_selection_share"]; has {
		if x, ok := p.number(sn); ok {
			if x <= 0 || x >= 1 {
				p.errorf(sn.line, sn.path, "must be in (0, 1) (got %s)", num(x))
			} else {
				b.TopKSelectionShare = x
			}
		}
	}

	if perUserOK && totalOK && perUser > total {
		p.errorf(perUserN.line, perUserN.path, "must be ≤ total (%s)", num(total))
	}
	if defOK && perUserOK && def > perUser {
		p.errorf(defN.line, defN.path, "must be ≤ per_user (%s)", num(perUser))
	}
	if maxOK && defOK && maxQ < def {
		p.errorf(maxN.line, maxN.path, "must be ≥ default_per_query (%s)", num(def))
	}
	if maxOK && perUserOK && maxQ > perUser {
		p.errorf(maxN.line, maxN.path, "must be ≤ per_user (%s)", num(perUser))
	}

	b.SelectionShare = DefaultSelectionShare
	if sn, has := f["selection_share"]; has {
		if x, ok := p.number(sn); ok {
			if x <= 0 || x >= 1 {
				p.errorf(sn.line, sn.path, "must be in (0, 1) (got %s)", num(x))
			} else {
				b.SelectionShare = x
			}
		}
	}
	dn, has := f["delta"]
	switch {
	case !noiseOK:
	case noise == Gaussian && !has:
		p.errorf(n.line, join(n.path, "delta"), "required when noise is gaussian")
	case has:
		if d, ok := p.number(dn); ok {
			if d <= 0 || d >= 1 {
				p.errorf(dn.line, dn.path, "must be in (0, 1) (got %s)", num(d))
			} else {
				b.Delta = d
			}
		}
	default:
		b.Delta = DefaultDelta
	}
	b.DeltaPerQuery = min(DefaultDeltaPerQuery, b.Delta)
	if qn, has := f["delta_per_query"]; has {
		if d, ok := p.number(qn); ok {
			switch {
			case d <= 0 || d >= 1:
				p.errorf(qn.line, qn.path, "must be in (0, 1) (got %s)", num(d))
			case b.Delta > 0 && d > b.Delta:
				p.errorf(qn.line, qn.path, "must be ≤ delta (%s)", num(b.Delta))
			default:
				b.DeltaPerQuery = d
			}
		}
	}
	return b
}
