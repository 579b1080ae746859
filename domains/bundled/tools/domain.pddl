; Tools: a research agent writes reports by calling tools that cost different amounts.
;
; Each job is a report about one topic. Notes for a job come from one of three kinds of tool:
;   web-search      cheap (per engine: search-cost), but its notes must be fact-checked before drafting;
;   query-database  mid-priced (query-cost), needs a one-off connect-database, only for topics the database
;                   indexes; its notes come verified;
;   ask-expert      expensive (consult-cost), only for topics the expert knows; notes come verified.
; A writer (writing-cost per model) turns verified notes into the report. Every job therefore has several
; grounded routes with different costs; learned failure costs (a flaky engine, a database that times out)
; shift the cheapest route from one tool to another.
(define (domain tools)
  (:requirements :strips :typing :action-costs)
  (:types
    search-engine database expert - tool
    job topic writer tool)
  (:predicates
    (about ?j - job ?t - topic)
    (indexes ?d - database ?t - topic)
    (knows ?e - expert ?t - topic)
    (connected ?d - database)
    (has-notes ?j - job)
    (verified ?j - job)
    (report-written ?j - job))
  (:functions
    (total-cost) - number
    (search-cost ?s - search-engine) - number
    (query-cost ?d - database) - number
    (consult-cost ?e - expert) - number
    (writing-cost ?w - writer) - number)

  (:action web-search
    :parameters (?j - job ?t - topic ?s - search-engine)
    :precondition (about ?j ?t)
    :effect (and (has-notes ?j) (increase (total-cost) (search-cost ?s))))

  (:action fact-check
    :parameters (?j - job)
    :precondition (has-notes ?j)
    :effect (and (verified ?j) (increase (total-cost) 2)))

  (:action connect-database
    :parameters (?d - database)
    :effect (and (connected ?d) (increase (total-cost) 2)))

  (:action query-database
    :parameters (?j - job ?t - topic ?d - database)
    :precondition (and (about ?j ?t) (indexes ?d ?t) (connected ?d))
    :effect (and (has-notes ?j) (verified ?j) (increase (total-cost) (query-cost ?d))))

  (:action ask-expert
    :parameters (?j - job ?t - topic ?e - expert)
    :precondition (and (about ?j ?t) (knows ?e ?t))
    :effect (and (has-notes ?j) (verified ?j) (increase (total-cost) (consult-cost ?e))))

  (:action write-report
    :parameters (?j - job ?w - writer)
    :precondition (and (has-notes ?j) (verified ?j))
    :effect (and (report-written ?j) (increase (total-cost) (writing-cost ?w)))))
