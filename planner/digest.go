package planner

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// StrategyDigest is a hex SHA-256 over a canonical encoding of what the
// plan measures and how its noise is calibrated: the options it was made
// for, its kind and name, the tables counted, every measured matrix (each
// Kronecker factor's entries, a Marginal plan's blocks, a Direct plan's
// row scales), the sensitivities and the exact rational noise parameters.
// It leaves out what does not change a release: planning times, the
// candidates' error figures and the variances derived from the
// calibration.
//
// Plans are a deterministic function of the catalog, the batch and the
// options (effort.go), so the digest is one too: recording it with a
// charge lets an auditor re-plan the recorded batch at the recorded
// options and compare. Floating-point values enter bit for bit, so the
// digest is reproducible with the same code on the same architecture;
// another architecture may round differently (e.g. fused multiply-adds on
// arm64) and so plan, and digest, differently.
func (p *Plan) StrategyDigest() string {
	d := digester{h: sha256.New()}
	d.str("dpproxy plan strategy v1")
	o := p.Options
	d.str(string(o.Noise))
	d.f64(o.Epsilon)
	d.f64(o.Rho)
	d.i64(int64(o.Objective))
	d.f64(o.maxCells())
	d.i64(o.Unit.Rows)
	d.i64(o.Unit.Groups)
	d.i64(o.Unit.PerGroup)

	d.i64(int64(p.Kind))
	d.str(p.Name)
	d.i64(int64(len(p.Tables)))
	for _, t := range p.Tables {
		d.ints(t)
	}
	d.i64(int64(len(p.Factors)))
	for _, f := range p.Factors {
		d.str(f.Name)
		if f.Classes != nil {
			d.sparseClasses(f.A, f.Classes)
		} else {
			d.sparse(f.A)
		}
		d.f64(f.L1)
		d.f64(f.L2)
		d.f64(f.Grid)
	}
	if p.Marginals == nil {
		d.i64(-1)
	} else {
		d.i64(int64(len(p.Marginals.Blocks)))
		for _, b := range p.Marginals.Blocks {
			d.ints(b.Cols)
			d.bool(b.Residual)
			d.f64(b.Epsilon)
			d.f64(b.Rho)
			d.u64(b.NoiseNum)
			d.u64(b.NoiseDen)
		}
	}
	d.i64(int64(len(p.Scale)))
	for _, s := range p.Scale {
		d.floats(s)
	}
	d.i64(int64(len(p.AggNoise)))
	for _, r := range p.AggNoise {
		d.i64(int64(len(r)))
		for _, n := range r {
			d.f64(n.Epsilon)
			d.f64(n.Rho)
			d.u64(n.NoiseNum)
			d.u64(n.NoiseDen)
			d.f64(n.Sensitivity)
		}
	}
	d.f64(p.Sensitivity)
	d.u64(p.NoiseNum)
	d.u64(p.NoiseDen)
	d.f64(p.Grid)
	return hex.EncodeToString(d.h.Sum(nil))
}

// digester writes the canonical encoding: fixed-width big-endian integers,
// floats as their IEEE bits, strings and lists length-prefixed.
type digester struct {
	h   hash.Hash
	buf [8]byte
}

func (d *digester) u64(v uint64) {
	binary.BigEndian.PutUint64(d.buf[:], v)
	d.h.Write(d.buf[:])
}

func (d *digester) i64(v int64)   { d.u64(uint64(v)) }
func (d *digester) f64(v float64) { d.u64(math.Float64bits(v)) }

func (d *digester) bool(v bool) {
	if v {
		d.u64(1)
	} else {
		d.u64(0)
	}
}

func (d *digester) str(s string) {
	d.u64(uint64(len(s)))
	d.h.Write([]byte(s))
}

func (d *digester) ints(v []int) {
	d.u64(uint64(len(v)))
	for _, x := range v {
		d.i64(int64(x))
	}
}

func (d *digester) floats(v []float64) {
	d.u64(uint64(len(v)))
	for _, x := range v {
		d.f64(x)
	}
}

// sparse writes a matrix's dimensions and, row by row, its non-zero
// entries as (column, value): the structured strategies (hierarchical over
// thousands of cells) are mostly zeros.
func (d *digester) sparse(a *mat.Dense) {
	if a == nil {
		d.i64(-1)
		return
	}
	r, c := a.Dims()
	d.i64(int64(r))
	d.i64(int64(c))
	raw := a.RawMatrix()
	for i := 0; i < r; i++ {
		row := raw.Data[i*raw.Stride : i*raw.Stride+c]
		nz := 0
		for _, v := range row {
			if v != 0 {
				nz++
			}
		}
		d.i64(int64(nz))
		for j, v := range row {
			if v != 0 {
				d.i64(int64(j))
				d.f64(v)
			}
		}
	}
}

// sparseClasses writes what sparse writes for A·P, a class-form strategy
// over the cells (ColumnStrategy.Classes), without building it: the
// digest of a plan does not depend on the form of its factors. A row's
// non-zero cells are the cells of its non-zero classes, written in cell
// order: O(non-zeros), not O(cells), per row.
func (d *digester) sparseClasses(a *mat.Dense, classes []int) {
	r, k := a.Dims()
	d.i64(int64(r))
	d.i64(int64(len(classes)))
	cellsOf := make([][]int, k) // each class's cells, in order
	for cell, c := range classes {
		if c >= 0 {
			cellsOf[c] = append(cellsOf[c], cell)
		}
	}
	raw := a.RawMatrix()
	var cells []int
	for i := 0; i < r; i++ {
		row := raw.Data[i*raw.Stride : i*raw.Stride+k]
		cells = cells[:0]
		for c, v := range row {
			if v != 0 {
				cells = append(cells, cellsOf[c]...)
			}
		}
		slices.Sort(cells)
		d.i64(int64(len(cells)))
		for _, cell := range cells {
			d.i64(int64(cell))
			d.f64(row[classes[cell]])
		}
	}
}
