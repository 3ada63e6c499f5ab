DROP TABLE req_answer;
