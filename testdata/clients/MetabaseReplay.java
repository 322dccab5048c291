import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * dpproxy's client test for MariaDB Connector/J (2.7, as Metabase bundles
 * it): Metabase's connection set-up, its sync (DatabaseMetaData and the
 * INFORMATION_SCHEMA queries of its MySQL driver, the privilege probe, field
 * values, row count, the row sample it takes for fingerprints), a query as
 * Metabase compiles it, cancellation through KILL QUERY, then the standard
 * flow with client-side and with server-side prepared statements.
 *
 * Environment: DPPROXY_HOST, DPPROXY_PORT, DPPROXY_USER, DPPROXY_PASSWORD,
 * DPPROXY_DB, DPPROXY_CA (optional: TLS verifying this certificate),
 * DPPROXY_FLOW (the standard flow as TSV: step, exec flag, SQL, params);
 * with DPPROXY_FLOW_ONLY=1 it runs only that flow, once.
 * Prints one JSON object per step (cmd/dpproxy/clients_common_test.go).
 */
public class MetabaseReplay {
    static final String HOST = System.getenv("DPPROXY_HOST");
    static final String PORT = System.getenv("DPPROXY_PORT");
    static final String USER = System.getenv("DPPROXY_USER");
    static final String PASSWORD = System.getenv("DPPROXY_PASSWORD");
    static final String DB = System.getenv().getOrDefault("DPPROXY_DB", "demo");
    static final String CA = System.getenv().getOrDefault("DPPROXY_CA", "");

    // ---- output ----

    static String json(Object o) {
        if (o == null) return "null";
        if (o instanceof Boolean || o instanceof Integer || o instanceof Long) return o.toString();
        if (o instanceof Map) {
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                if (b.length() > 1) b.append(',');
                b.append(json(e.getKey().toString())).append(':').append(json(e.getValue()));
            }
            return b.append('}').toString();
        }
        if (o instanceof List) {
            StringBuilder b = new StringBuilder("[");
            for (Object x : (List<?>) o) {
                if (b.length() > 1) b.append(',');
                b.append(json(x));
            }
            return b.append(']').toString();
        }
        String s = o.toString();
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static void emit(String step, List<String> cols, List<List<String>> rows, SQLException err, Map<String, Object> info) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("step", step);
        if (cols != null) m.put("columns", cols);
        if (rows != null) m.put("rows", rows);
        if (err != null) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("code", err.getErrorCode());
            e.put("sqlstate", err.getSQLState() == null ? "" : err.getSQLState());
            e.put("message", err.getMessage());
            m.put("error", e);
        }
        if (info != null) m.put("info", info);
        System.out.println(json(m));
        System.out.flush();
    }

    static void emitRows(String step, ResultSet rs, Map<String, Object> info) throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        List<String> cols = new ArrayList<>();
        for (int i = 1; i <= md.getColumnCount(); i++) cols.add(md.getColumnLabel(i));
        List<List<String>> rows = new ArrayList<>();
        while (rs.next()) {
            List<String> row = new ArrayList<>();
            for (int i = 1; i <= md.getColumnCount(); i++) row.add(rs.getString(i));
            rows.add(row);
        }
        rs.close();
        emit(step, cols, rows, null, info);
    }

    // ---- connections ----

    static String url(String extra) {
        // What Metabase's MySQL driver sets, plus TLS when asked for.
        String u = "jdbc:mysql://" + HOST + ":" + PORT + "/" + DB
                + "?zeroDateTimeBehavior=convertToNull&useUnicode=true&characterEncoding=UTF8"
                + "&characterSetResults=UTF8&useCompression=false&tinyInt1isBit=true";
        if (!CA.isEmpty()) {
            u += "&useSSL=true&serverSslCert=" + CA;
        } else {
            u += "&useSSL=false&allowPublicKeyRetrieval=true";
        }
        return u + extra;
    }

    static Connection connect(String user, String password, String extra) throws SQLException {
        return DriverManager.getConnection(url(extra), user, password);
    }

    static void query(Connection c, String step, String sql) {
        try (Statement st = c.createStatement()) {
            boolean hasRows = st.execute(sql);
            if (hasRows) emitRows(step, st.getResultSet(), null);
            else emit(step, null, null, null, null);
        } catch (SQLException e) {
            emit(step, null, null, e, null);
        }
    }

    static String metabase(String sql) {
        return "-- Metabase:: userID: 1 queryType: MBQL queryHash: 5f0c3e\n" + sql;
    }

    // ---- Metabase ----

    static void metabaseSync(Connection c) throws SQLException {
        // Connection set-up, as Metabase does it on a pooled connection.
        c.setTransactionIsolation(Connection.TRANSACTION_READ_UNCOMMITTED);
        c.setReadOnly(true);
        Map<String, Object> info = new LinkedHashMap<>();
        DatabaseMetaData md = c.getMetaData();
        info.put("product", md.getDatabaseProductName());
        info.put("version", md.getDatabaseProductVersion());
        info.put("driver", md.getDriverName() + " " + md.getDriverVersion());
        info.put("valid", c.isValid(5)); // COM_PING
        emit("mb_connect", null, null, null, info);

        query(c, "mb_autocommit", "set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')");
        query(c, "mb_variables", "SELECT @@max_allowed_packet,@@system_time_zone,@@time_zone,@@auto_increment_increment");
        query(c, "mb_isolation", "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED");
        query(c, "mb_isolation_read", "SELECT @@transaction_isolation");
        query(c, "mb_time_zone", "SET time_zone = '+00:00'");
        query(c, "mb_default_tz", "SELECT @@GLOBAL.time_zone AS global_tz, @@system_time_zone AS system_tz, "
                + "time_format(   timediff(      now(), convert_tz(now(), @@GLOBAL.time_zone, '+00:00')   ),   '%H:%i' ) AS 'offset';");
        query(c, "mb_partial_revokes", "SHOW VARIABLES LIKE 'partial_revokes';");

        // describe-database and describe-table through DatabaseMetaData.
        try {
            emitRows("mb_get_tables", md.getTables(DB, null, "%", new String[] {"TABLE", "PARTITIONED TABLE", "VIEW", "FOREIGN TABLE", "MATERIALIZED VIEW", "EXTERNAL TABLE"}), null);
        } catch (SQLException e) {
            emit("mb_get_tables", null, null, e, null);
        }
        try {
            emitRows("mb_get_columns", md.getColumns(DB, null, "adult", null), null);
        } catch (SQLException e) {
            emit("mb_get_columns", null, null, e, null);
        }
        try {
            emitRows("mb_get_pks", md.getPrimaryKeys(DB, null, "adult"), null);
        } catch (SQLException e) {
            emit("mb_get_pks", null, null, e, null);
        }
        try {
            emitRows("mb_get_fks", md.getImportedKeys(DB, null, "adult"), null);
        } catch (SQLException e) {
            emit("mb_get_fks", null, null, e, null);
        }
        try {
            emitRows("mb_get_catalogs", md.getCatalogs(), null);
        } catch (SQLException e) {
            emit("mb_get_catalogs", null, null, e, null);
        }

        // The MySQL driver's own INFORMATION_SCHEMA queries.
        query(c, "mb_describe_fields", "SELECT `c`.`column_name` AS `name`, `c`.`ordinal_position` - 1 AS `database-position`, NULL AS `table-schema`, "
                + "`c`.`table_name` AS `table-name`, IF(`column_type` = 'tinyint(1)', 'BIT', UPPER(`c`.`data_type`)) AS `database-type`, "
                + "`c`.`extra` = 'auto_increment' AS `database-is-auto-increment`, "
                + "((`column_default` IS NULL) OR (LOWER(`column_default`) = 'null')) AND (`is_nullable` = 'NO') AND NOT (`c`.`extra` = 'auto_increment') AS `database-required`, "
                + "`c`.`column_key` = 'PRI' AS `pk?`, `is_nullable` = 'YES' AS `database-is-nullable`, "
                + "IF(LOWER(`column_default`) = 'null', NULL, `column_default`) AS `database-default`, "
                + "(`generation_expression` IS NOT NULL) AND (`generation_expression` <> '') AS `database-is-generated`, "
                + "NULLIF(`c`.`column_comment`, '') AS `field-comment` FROM `information_schema`.`columns` AS `c` "
                + "WHERE (c.table_schema not in ('information_schema','performance_schema','sys','mysql')) "
                + "AND (c.table_name not in ('innodb_table_stats', 'innodb_index_stats')) AND (`c`.`table_schema` = '" + DB + "') "
                + "AND (LOWER(`c`.`table_name`) IN ('adult')) ORDER BY `c`.`table_name` ASC, `c`.`ordinal_position` ASC");
        query(c, "mb_describe_fks", "SELECT NULL AS `pk-table-schema`, `a`.`referenced_table_name` AS `pk-table-name`, "
                + "`a`.`referenced_column_name` AS `pk-column-name`, NULL AS `fk-table-schema`, `a`.`table_name` AS `fk-table-name`, "
                + "`a`.`column_name` AS `fk-column-name` FROM `information_schema`.`key_column_usage` AS `a` "
                + "INNER JOIN `information_schema`.`table_constraints` AS `b` USING (`constraint_schema`, `constraint_name`, `table_name`) "
                + "WHERE (`b`.`constraint_type` = 'FOREIGN KEY') AND (`a`.`referenced_table_schema` IS NOT NULL) ORDER BY `a`.`table_name` ASC");
        query(c, "mb_probe", "SELECT TRUE AS `_` FROM `adult` WHERE 1 <> 1 LIMIT 0");

        // Sync analysis, with a row limit as Metabase's statements carry one.
        try (Statement st = c.createStatement()) {
            st.setMaxRows(2000); // Connector/J: set @@SQL_SELECT_LIMIT=2000
            emitRows("mb_field_values", st.executeQuery(metabase(
                    "SELECT `adult`.`occupation` AS `occupation` FROM `adult` GROUP BY `adult`.`occupation` ORDER BY `adult`.`occupation` ASC LIMIT 1000")), null);
        } catch (SQLException e) {
            emit("mb_field_values", null, null, e, null);
        }
        query(c, "mb_row_count", metabase("SELECT COUNT(*) AS `count` FROM `adult`"));
        query(c, "mb_sample", metabase("SELECT `adult`.`age` AS `age`, `adult`.`workclass` AS `workclass`, `adult`.`education` AS `education`, "
                + "`adult`.`sex` AS `sex`, `adult`.`income` AS `income` FROM `adult` LIMIT 10000"));
        // A question as Metabase compiles it: count by occupation, top 3.
        query(c, "mb_question", metabase("SELECT `adult`.`occupation` AS `occupation`, COUNT(*) AS `count` FROM `adult` "
                + "WHERE `adult`.`age` > 50 GROUP BY `adult`.`occupation` ORDER BY `count` DESC, `adult`.`occupation` ASC LIMIT 3"));
        // Metabase's own table view: raw rows, refused.
        query(c, "mb_table_view", metabase("SELECT `adult`.`age` AS `age`, `adult`.`sex` AS `sex` FROM `adult` LIMIT 2000"));
    }

    // ---- cancellation ----

    static long connectionId(Connection c) throws SQLException {
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT CONNECTION_ID()")) {
            rs.next();
            return rs.getLong(1);
        }
    }

    static void kills() throws SQLException {
        try (Connection a = connect(USER, PASSWORD, ""); Connection b = connect(USER, PASSWORD, "");
             Connection bob = connect("bob", "bob", "")) {
            long id = connectionId(a);
            Statement st = a.createStatement();
            st.cancel(); // Connector/J: KILL QUERY over a new connection when a query runs; idle here
            st.close();
            query(b, "kill_query_own", "KILL QUERY " + id);
            query(a, "after_kill_query", "SELECT COUNT(*) AS n FROM adult WHERE sex = 'Male'");
            query(bob, "kill_other_user", "KILL QUERY " + id);
            query(b, "kill_unknown", "KILL 4000000000");
            query(b, "processlist", "SHOW FULL PROCESSLIST");
            query(b, "grants", "SHOW GRANTS");
            query(b, "kill_connection", "KILL CONNECTION " + id);
            Map<String, Object> info = new LinkedHashMap<>();
            try {
                Thread.sleep(100);
            } catch (InterruptedException ignored) {
            }
            info.put("valid_after_kill", a.isValid(2));
            emit("after_kill_connection", null, null, null, info);
        }
    }

    // ---- the standard flow ----

    static void flow(Connection c, String prefix, List<String[]> steps) {
        for (String[] s : steps) {
            String step = prefix + s[0];
            boolean exec = s[1].equals("1");
            String sql = s[2];
            try (PreparedStatement ps = c.prepareStatement(sql)) {
                int k = 1;
                if (s.length > 3 && !s[3].isEmpty()) {
                    for (String p : s[3].split("\\|")) {
                        if (p.startsWith("i:")) ps.setLong(k++, Long.parseLong(p.substring(2)));
                        else ps.setString(k++, p.substring(2));
                    }
                }
                if (exec) {
                    ps.execute();
                    emit(step, null, null, null, null);
                } else {
                    emitRows(step, ps.executeQuery(), null);
                }
            } catch (SQLException e) {
                emit(step, null, null, e, null);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        List<String[]> steps = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(System.getenv("DPPROXY_FLOW")), StandardCharsets.UTF_8)) {
            if (!line.isEmpty()) steps.add(line.split("\t", -1));
        }
        if ("1".equals(System.getenv("DPPROXY_FLOW_ONLY"))) {
            // Only the flow, with client-side prepared statements.
            try (Connection c = connect(USER, PASSWORD, "")) {
                flow(c, "", steps);
            }
            return;
        }
        try (Connection c = connect(USER, PASSWORD, "")) {
            metabaseSync(c);
        }
        kills();
        try (Connection c = connect(USER, PASSWORD, "")) {
            flow(c, "", steps);
        }
        try (Connection c = connect(USER, PASSWORD, "&useServerPrepStmts=true")) {
            flow(c, "server_", steps);
        }
        try {
            connect(USER, PASSWORD + "-wrong", "").close();
            emit("bad_password", null, null, null, null);
        } catch (SQLException e) {
            emit("bad_password", null, null, e, null);
        }
    }
}
