// Package mysqltime holds MySQL's calendar functions on UTC times, as
// MySQL computes them: DATE_FORMAT and its units, STR_TO_DATE, WEEK and
// YEARWEEK modes, TO_DAYS, DATE_ADD with month arithmetic, TIMESTAMPDIFF.
// They are pure functions of their arguments; compile evaluates them over
// a time column's bins (compile/timefuncs.go), never over data.
package mysqltime
