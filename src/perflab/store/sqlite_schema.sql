-- revision 0005
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
CREATE TABLE environment (
	id INTEGER NOT NULL, 
	testbox_id INTEGER NOT NULL, 
	digest VARCHAR(64) NOT NULL, 
	facts JSON NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(testbox_id) REFERENCES testbox (id), 
	UNIQUE (digest)
);
CREATE TABLE failure (
	id INTEGER NOT NULL, 
	run_id INTEGER NOT NULL, 
	item VARCHAR(255) NOT NULL, 
	message TEXT NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_failure_run_item UNIQUE (run_id, item), 
	FOREIGN KEY(run_id) REFERENCES run (id) ON DELETE CASCADE
);
CREATE TABLE monitor_series (
	id INTEGER NOT NULL, 
	run_id INTEGER NOT NULL, 
	monitor VARCHAR(50) NOT NULL, 
	repetition INTEGER NOT NULL, 
	process INTEGER, 
	t FLOAT NOT NULL, 
	"values" JSON NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_id) REFERENCES run (id) ON DELETE CASCADE
);
CREATE TABLE robot_report (
	id INTEGER NOT NULL, 
	robot VARCHAR(100) NOT NULL, 
	culprit VARCHAR(64) NOT NULL, 
	metric VARCHAR(255) NOT NULL, 
	good VARCHAR(64) NOT NULL, 
	bad VARCHAR(64) NOT NULL, 
	created DATETIME NOT NULL, 
	subject TEXT NOT NULL, 
	text TEXT NOT NULL, 
	sent_to TEXT, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_robot_report_culprit UNIQUE (robot, culprit, metric)
);
CREATE TABLE run (
	id INTEGER NOT NULL, 
	uuid VARCHAR(36) NOT NULL, 
	testbox_id INTEGER NOT NULL, 
	environment_id INTEGER NOT NULL, 
	benchmark VARCHAR(100) NOT NULL, 
	name VARCHAR(500) NOT NULL, 
	params JSON NOT NULL, 
	tag VARCHAR(255), 
	"commit" VARCHAR(64), 
	dirty BOOLEAN, 
	started DATETIME NOT NULL, 
	finished DATETIME, 
	status VARCHAR(20) NOT NULL, 
	comment TEXT, 
	error TEXT, 
	host VARCHAR(255), 
	pid INTEGER, 
	pid_start VARCHAR(40), job JSON, monitors JSON, 
	PRIMARY KEY (id), 
	UNIQUE (uuid), 
	FOREIGN KEY(testbox_id) REFERENCES testbox (id), 
	FOREIGN KEY(environment_id) REFERENCES environment (id)
);
CREATE TABLE sample (
	id INTEGER NOT NULL, 
	run_id INTEGER NOT NULL, 
	metric VARCHAR(255) NOT NULL, 
	value FLOAT NOT NULL, 
	unit VARCHAR(32) NOT NULL, 
	direction INTEGER NOT NULL, 
	repetition INTEGER NOT NULL, process INTEGER, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_id) REFERENCES run (id) ON DELETE CASCADE
);
CREATE TABLE testbox (
	id INTEGER NOT NULL, 
	name VARCHAR(255) NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (name)
);
CREATE INDEX ix_monitor_series_run_monitor ON monitor_series (run_id, monitor);
CREATE INDEX ix_run_benchmark_started ON run (benchmark, started);
CREATE INDEX ix_run_status ON run (status);
CREATE INDEX ix_run_tag ON run (tag);
CREATE INDEX ix_sample_run_metric ON sample (run_id, metric);
