# Surviving a dispatcher restart (docs/ARCHITECTURE.md): the resume books
# without sockets, then real processes with the dispatcher SIGKILLed.
gt_add_test(resume_book_test resume_book_test.cc)
gt_add_test(dispatcher_restart_test dispatcher_restart_test.cc)
add_dependencies(dispatcher_restart_test gt-dispatcher gt-worker gt_torch gt_sharding)
# A worker still busy with what the old dispatcher sent when it rejoins.
gt_add_test(rejoin_busy_test rejoin_busy_test.cc)
# The sharding stage's placement tags and its restore from them, in-process.
gt_add_test(sharding_restore_test sharding_restore_test.cc)
target_link_libraries(sharding_restore_test PRIVATE gt_sharding_runtime)
