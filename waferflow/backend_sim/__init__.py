"""waferflow.backend_sim"""
