# hostprep on the real kernel (sourced by tests.sh when /usr/bin/hostprep exists).
# The stand-in plays nvidia: --gpu-ids 1234:11e8 --host-driver standin, holders /dev/standin*.
run_test hostprep.runs hp_t_runs
run_test hostprep.preflight_iommu_checks_pass hp_t_preflight
run_test hostprep.dry_run_changes_nothing hp_t_dry_run
run_test hostprep.passthrough_round_trip hp_t_round_trip 90
run_test hostprep.idempotent hp_t_idempotent 90
run_test hostprep.status_reports_mode hp_t_status 90
run_test hostprep.shared_group_moves_sibling hp_t_shared_group 90
run_test hostprep.mixed_split_both_ways hp_t_mixed_split 90
run_test hostprep.bridge_group_skips_bridge hp_t_bridge_group 90
run_test hostprep.reset_function_on_return ". /tests/reset.sh; hp_t_reset_function" 120
run_test hostprep.reset_bus_on_return ". /tests/reset.sh; hp_t_reset_bus" 180
run_test hostprep.reset_never_a_bus_with_a_nic ". /tests/reset.sh; hp_t_reset_never_nic_bus" 90
run_test hostprep.recover_real_kernel ". /tests/reset.sh; hp_t_recover" 180
run_test hostprep.reset_preflight ". /tests/reset.sh; hp_t_reset_preflight" 60
run_test hostprep.nvswitch_round_trip ". /tests/nvswitch.sh; hp_t_nvswitch_round_trip" 120
run_test hostprep.nvswitch_faults_roll_back ". /tests/nvswitch.sh; hp_t_nvswitch_faults" 240
run_test hostprep.operator_driver_prepare_waits ". /tests/operator.sh; hp_t_operator_prepare" 180
run_test hostprep.operator_driver_agent_converges_on_insmod ". /tests/operator.sh; hp_t_operator_agent" 180
run_test hostprep.foreign_device_refused hp_t_foreign_refused
run_test hostprep.in_use_refused hp_t_in_use 60
run_test hostprep.failure_mid_plan_rolls_back hp_t_mid_plan_failure 90
run_test hostprep.vf_in_use_refused hp_t_vf_in_use 90
run_test hostprep.vgpu_mtty_create_remove hp_t_vgpu_mtty 120
run_test hostprep.crash_after_each_step_recovers hp_t_crash_sweep 240
run_test hostprep.sigkill_sweep_both_directions ". /tests/sigkill-sweep.sh; hp_t_sigkill_sweep" 600
run_test hostprep.sigkill_during_slow_remove hp_t_sigkill_slow_remove 90
run_test hostprep.force_with_holder_times_out hp_t_force_holder 120
run_test hostprep.vf_held_numvfs_write_pending hp_t_vf_held_numvfs_pending 120
run_test hostprep.vf_driver_back_after_crash hp_t_vf_back_after_crash 90
run_test hostprep.probe_stalled_is_left_alone hp_t_probe_stalled 120
