package planner

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// invUpper inverts the upper-triangular matrix in a (row-major, n×n,
// stride s) in place, recursively: for B = [B₁₁ B₁₂; 0 B₂₂],
//
//	B⁻¹ = [B₁₁⁻¹, −B₁₁⁻¹·B₁₂·B₂₂⁻¹; 0, B₂₂⁻¹],
//
// so all but O(n²·block) of the (1/3)n³ flops are general matrix products,
// which gonum runs in parallel several times faster than its triangular
// routines. It reports false if a diagonal entry is zero.
func invUpper(a []float64, n, s int) bool {
	const leaf = 192
	if n <= leaf {
		return lapack64.Trtri(blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: n, Stride: s, Data: a})
	}
	n1 := n / 2
	n2 := n - n1
	b11 := a
	b22 := a[n1*s+n1:]
	if !invUpper(b11, n1, s) || !invUpper(b22, n2, s) {
		return false
	}
	b12 := blas64.General{Rows: n1, Cols: n2, Stride: s, Data: a[n1:]}
	tmp := blas64.General{Rows: n1, Cols: n2, Stride: n2, Data: make([]float64, n1*n2)}
	// tmp = B₁₂·B₂₂⁻¹ (B₂₂⁻¹ upper triangular: lower part of its block is 0
	// only logically, so copy it as a general matrix with zeros).
	c22 := upperAsGeneral(b22, n2, s)
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, b12, c22, 0, tmp)
	c11 := upperAsGeneral(b11, n1, s)
	blas64.Gemm(blas.NoTrans, blas.NoTrans, -1, c11, tmp, 0, b12)
	return true
}

// upperAsGeneral copies the upper triangle of an n×n block into a general
// matrix with explicit zeros below the diagonal.
func upperAsGeneral(a []float64, n, s int) blas64.General {
	out := make([]float64, n*n)
	for i := 0; i < n; i++ {
		copy(out[i*n+i:(i+1)*n], a[i*s+i:i*s+n])
	}
	return blas64.General{Rows: n, Cols: n, Stride: n, Data: out}
}
