"""The class: the grader's command line, the instructor's files, each lesson's limits, the
gradebook and the files an LMS imports, the run's reports."""
