package budget

import "fmt"

// ExceededError is returned by [Ledger.Charge] when a charge would overspend
// a limit. Nothing was appended. All amounts are ε at Limit.Delta, or, when
// Delta is set, δ spent against Limit.MaxDelta.
type ExceededError struct {
	Limit     Limit   // the first limit (in the order given) that would be exceeded
	Delta     bool    // the δ budget, not the ε budget, would be exceeded
	Spent     float64 // ε (δ) already spent in the limit's scope
	Requested float64 // ε (δ) of this charge on its own
	Remaining float64 // Limit.Epsilon (MaxDelta) − Spent, never negative
}

func (e *ExceededError) Error() string {
	var who string
	switch e.Limit.Scope {
	case ScopeUserTable:
		who = fmt.Sprintf("user %s on table %s", e.Limit.User, e.Limit.Table)
	case ScopeTable:
		who = fmt.Sprintf("table %s (all users)", e.Limit.Table)
	case ScopeUser:
		who = fmt.Sprintf("user %s (all tables)", e.Limit.User)
	default:
		who = fmt.Sprintf("scope %q", e.Limit.Scope)
	}
	if e.Delta {
		return fmt.Sprintf("privacy budget exceeded for %s: requested δ=%.6g, remaining δ=%.6g",
			who, e.Requested, e.Remaining)
	}
	return fmt.Sprintf("privacy budget exceeded for %s: requested ε=%.6g, remaining ε=%.6g",
		who, e.Requested, e.Remaining)
}

// TamperError is returned by [Ledger.Verify] when the ledger is not what
// this package wrote. Seq names the first entry found bad; it is 0 when the
// problem is not one entry's (the head row is missing, or the spent
// aggregate disagrees with the entries).
type TamperError struct {
	Seq    int64
	Reason string
}

func (e *TamperError) Error() string {
	if e.Seq == 0 {
		return "ledger verification failed: " + e.Reason
	}
	return fmt.Sprintf("ledger verification failed at entry %d: %s", e.Seq, e.Reason)
}
