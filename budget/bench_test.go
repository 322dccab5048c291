package budget

import (
	"context"
	"testing"
)

func BenchmarkCharge(b *testing.B) {
	ctx := context.Background()
	l, err := Open(ctx, b.TempDir()+"/ledger.sqlite")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	c := lapCharge("analyst", 1e-9, "adult")
	lim := []Limit{userTable("analyst", "adult", 1), {Scope: ScopeTable, Table: "adult", Epsilon: 1}}
	for b.Loop() {
		if _, err := l.Charge(ctx, c, lim); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChargeRefused(b *testing.B) {
	ctx := context.Background()
	l, err := Open(ctx, b.TempDir()+"/ledger.sqlite")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	c := lapCharge("analyst", 2, "adult")
	lim := []Limit{userTable("analyst", "adult", 1)}
	for b.Loop() {
		if _, err := l.Charge(ctx, c, lim); err == nil {
			b.Fatal("charged")
		}
	}
}
